#include "codec/fixed_scale_offset_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>

#include "codec/codec_test_harness.h"
#include "metadata/v2_metadata.h"

namespace zarrstream {
namespace {

using testing::IsMetadataError;
using testing::Representation;

std::vector<std::byte> FromHex(std::string_view hex) {
  std::vector<std::byte> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::byte>(std::stoi(std::string(hex.substr(2 * i, 2)), nullptr, 16));
  }
  return out;
}

// The fixtures store little-endian values; the codec works on native ones.
std::vector<std::byte> Native(std::vector<std::byte> bytes, DataType type) {
  const size_t size = DataTypeSize(type);
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i + size <= bytes.size(); i += size) {
      std::reverse(bytes.begin() + i, bytes.begin() + i + size);
    }
  }
  return bytes;
}

DataType TypeOf(std::string_view numpy) {
  auto parsed = ParseV2DataType(numpy);
  EXPECT_TRUE(parsed.ok()) << numpy;
  return parsed->first;
}

// Produced by numcodecs 0.16 with numpy 2.4: FixedScaleOffset(offset, scale, dtype, astype)
// .encode(x) == enc (x includes ties such as offset + 0.25 at scale 10) and decode(enc_in) == dec.
// 40 values each, little-endian hex.
struct FsoCase {
  const char* dtype;
  const char* astype;
  const char* offset;  // JSON: an integer and a float differ, as Python ints and floats do
  const char* scale;
  const char* x;
  const char* enc;
  const char* enc_in;
  const char* dec;
};

const FsoCase kCases[] = {
    {"<f8", "|u1", R"(1000)", R"(10)",
         "6666666666408f403333333333418f400000000000428f409a999999993f8f40cdcccccccc3e8f40"
         "cdcccccccc428f409d0e7e0235378f405c5e925bf2338f404fb2cf4f2f3f8f40a55e0473fa318f40"
         "aa68209dd23b8f403417fa0758428f4094feb209fc4c8f408d5fd57074428f40b4e3b93912348f40"
         "7bef5499643a8f40df2af11110568f4005d3d4e40f3c8f40fd6b2509412a8f4082084c814b298f40"
         "fb1611c277478f40f44f2fa1e94d8f40cffe93ad6e5d8f403052a8d049398f402a310f03f7608f40"
         "ad6efa0fa8388f400e163b07543b8f40a428fb3c7a338f40878321d7fc4c8f403efa951e34598f40"
         "f0e918b11e408f40f363e69afe348f40ee809752a61c8f40bb14089021448f408db94fb8a5388f40"
         "bc699d7cf13b8f40068ebd57e6318f40c70dcfa72f2c8f407a3699a793368f40f32c247a074b8f40",
         "00010200ff04f5f1ffeefb031003f1f91cfbe5e4091125f829f7faf0102000f2d405f7fbeee7f40e",
         "a97a74f195cfb090042ef919536ff6203d167f12875b040a29a7ebd688c2fa856713726291f655a2",
         "3333333333c78f409a99999999a18f40cdcccccccc9c8f4066666666660090403333333333b78f40"
         "9a99999999e58f40cdcccccccccc8f403333333333b38f403333333333438f40cdcccccccc648f40"
         "9a999999990390400000000000548f406666666666828f40cdcccccccc988f406666666666029040"
         "9a99999999598f40cdcccccccc708f409a99999999518f409a99999999a58f4066666666664e8f40"
         "0000000000ac8f40cdcccccccc888f403333333333438f400000000000488f40cdcccccccc608f40"
         "9a99999999c58f400000000000fc8f403333333333eb8f40cdccccccccac8f403333333333db8f40"
         "00000000000490406666666666aa8f406666666666928f4033333333334f8f4033333333339b8f40"
         "66666666668e8f400000000000b48f4066666666660290400000000000848f409a99999999c18f40"},
    {"<f4", "<i2", R"(0.5)", R"(100.0)",
         "cdcc0c3f6666263f0000403f6666e63e3333b33e9a99593f752e08c02485a13f80f14f3e8aef2140"
         "981f0e3e3bd61b40832b5dbf73d81240023ca1bec6af34bfe842523f7488d13f201f62c0a9db75c0"
         "d7fb8e3fe7b0ce3e6ce9aac06c398cc084cad4bfc506c03f1506953faaf75f4023957e401fb9ee40"
         "3c7e67c078d3ea3e69fc6a40fbc244c02f6761c0f141933f0fd67040581a874091fd92c0fe253dc0",
         "05000f001900fbfff1ff2300f9fe4c00e2ffcb00dcffc10078ffb300afff87ff200072006dfe4efe"
         "3e00f6ffb8fd18fe28ff640042002c015c01b80264fefcff3d019bfe6efe41004601740103fea6fe",
         "07719b2bc6a8a604eadb135d6eb610064e66bc1c215c12e97b262201a5b35703f6cea02c3e1c3153"
         "bc312b79023b89e0f7da17f539bb3c4238ba86c19f802783bfcae154020f7bd14143ce8c26e66f3e",
         "cdec90438f42e042cdcc5ec3666646418fc2b7c21fc56e430ad73bc3f628804133338343b81e9442"
         "9a596c43cdcc68c21f05c6429a99594052f842c3cdcc10417b14fac2e17ae5429a99914252785543"
         "d7a3ff4252589b435c8f17439a19a0c2b89ebcc2a470dbc1ec912fc35c0f2a43d72332c3a4701fc3"
         "85cba2c3148e9fc37bd407c33dca594314ae1b42142eedc285ab2c43333393c3295c83c27b542043"},
    {"<f8", "<i4", R"(-3.25)", R"(0.3333333333333333)",
         "9a999999999909c0cdcccccccccc08c000000000000008c06666666666660ac03333333333330bc0"
         "33333333333307c009c63250b03603c06603cb658cfaf3bf5d95750d5fef05c07447b4909898f7bf"
         "a6e75faeb65411c0fcbaa7b44aadfd3f13d4862aa5d716c0583ab15262e0fd3feadcb782e9900dc0"
         "5ca9e51fdc59e2bfa11646bd22a905c056b813e4acd9fcbf08724c3d16f4f33f4b4f8422647805c0"
         "e5df75ad517017c02aba69d42e2a03c0c8d2874d9d1ff3bf8a29e042e28f24c0403c9bf25ce1cdbf"
         "800ee81e0b17bb3fb6d3b3f8fa8d20c034237e7742590cc0685e8df13ecce5bf92a1925e85f319c0"
         "7cbd4ee6394e11c0dcb0a165a15a10c096b65c378e2df7bf00d419b9c825c73f51e1ab1eff7209c0"
         "05cb8c532d3b07c038bb5d3d8b4ed7bf4471410615e7f7bf988bd39d764b0bc038e79637926bea3f",
         "00000000000000000000000000000000000000000000000000000000010000000000000001000000"
         "0000000002000000ffffffff02000000000000000100000000000000000000000100000000000000"
         "ffffffff0000000001000000feffffff0100000001000000feffffff0000000001000000ffffffff"
         "00000000000000000100000001000000000000000000000001000000010000000000000001000000",
         "6eb7d25c8c7c359e3a98a4e1d59927c67f1f4fe311818bc73161fb17daa0776eb2c08b3499982404"
         "3514e06ddc5bd502fbc8e84db3d013f920b085c222888fda478809bc812c122bd702f9febfd995f7"
         "cb3cdd0e4e6abb0fe9d94962e1255c3639da22232ff53a25b05494e0387943adbc37f9344803c868"
         "2b4855d6d144b9ab1c3d521108aa6b10529ed4ac26c5de6aa45bc8d606bfd17bd2d35c6474ee1ddb",
         "00006c648267f1410000f4a5f855f2c1000050d58dc4d6c10000885026b1e5c100009061a884d5c1"
         "0000089aaf2be5c10000f0e388fcd1410000ac286eb6f4410000584268b4e3410000808f93dba841"
         "0000bcc9039af441000080212700a1410000b85d4b37ed41000040ea8dc4b4c1000068f4dd0de7c1"
         "000050e75914dcc10000c8e56c7ce9c10000f8afd026e041000000f2bba788c1000040c6723eb9c1"
         "0000e02edb4bc641000060731f99c74100007cdbd86df2410000f8338e62e4410000f0a9235ada41"
         "000070e237ecdb410000d07cc090d7c10000688bb206efc1000018e674dde34100004c9d80a5f341"
         "000090e00940dfc100000832869aefc1000060a85bfbc9410000600a7fa1c8410000a8a14430efc1"
         "0000ecf6c409f4410000d045bbe9dec10000ecd05337f74100002cb767d1f2410000d0298da9dbc1"},
    {"<f2", "|u1", R"(1)", R"(10)",
         "333c9a3c003d9a3bcd3a663de03c7246c83aa7c404bddcbe0ac2cabc92bbf33348b897409e406d3e"
         "ab3e81c4bbc320be523f88c293b13d3ff646623f24b84f44b13e89315c44b0be773e203d7243bfc0",
         "00020200ff030236fec7e9e5d8eaedf8f10d0d0607c9cfe708d5f4083c08f12107f822e506031bde",
         "f68bb27c7b0013ee5b5549758ca76829074707d640e66252786828ec6a4dfc607633a8cebbe90968",
         "664e734bb34cb34aa64a003ccd41334e0d49c04826485a4a804b6d4cb3491a45cd3e0d48cd3e9a4d"
         "6647004e66499a48804ab3490045264ecd495a488d4e4d49664a1a46734c664ded4c134e9a3fb349"},
    {"<i4", "<i2", R"(1000)", R"(10)",
         "19040000ea030000d303000008040000b903000019040000f903000001040000d903000002040000"
         "04040000e4030000d9030000d303000009040000170400000e040000dd030000e903000016040000"
         "1804000000040000f4030000d6030000e8030000ca030000fd030000fd030000ed030000f8030000"
         "d8030000ef030000d0030000ec03000013040000d1030000c503000011040000bb030000e8030000",
         "ea0114002eff40012afeea01aa00fa006aff04011801d8ff6aff2eff4a01d6017c0192ff0a00cc01"
         "e001f00078004cff0000d4fed200d2003200a00060ff460010ff2800ae011affa2fe9a013efe0000",
         "06467662242a8f6a08e39b5609491f4ebe6572d5f6ef363f4d4e8b3ded366faae04acba76de109a4"
         "ce3c44adfb0bf8dd45f69c5e03a4b57369f83be2372f58a1a60685e64af9388f36ca74b7c05125b3",
         "e80a0000c00d00001e0800008f0e000002010000910c0000350b0000b70b0000140e0000a7ffffff"
         "4d0200003a0a0000bc0b00000f0a0000660900005afbffff640b000016fbffffd9000000b6faffff"
         "fc090000a2fbffff1a05000080000000ee0200005e0d0000b6faffff7a0f000025030000ed000000"
         "a008000071faffff920400005b0100003c030000a1f8ffff87feffffa7fcffff140c000039fcffff"},
    {"<i4", "|u1", R"(7)", R"(0.5)",
         "f8ffffffeeffffff1c0000001000000029000000e1fffffff9ffffff21000000140000000f000000"
         "e9ffffff10000000f9ffffff270000001f000000f6fffffffbffffff33000000f9ffffff03000000"
         "f0ffffff160000001100000023000000d6fffffffaffffff0000000027000000ecffffffd9ffffff"
         "080000000a0000002d0000000900000020000000ddfffffff7ffffff0d0000001000000037000000",
         "f8f40a0411edf90d0604f104f9100cf8fa16f9fef408050ee8fafc10f2e9000213010cebf8030418",
         "a2ff71c06a5901b1c6018dc5d38cef51975eed7ddb04ea9aa3016a94fad485c7d4f6b88ab298a8c0",
         "4b01000005020000e900000087010000db000000b900000009000000690100009301000009000000"
         "2101000091010000ad0100001f010000e5010000a900000035010000c3000000e101000001010000"
         "bd0100000f000000db0100003b0100004d01000009000000db0000002f010000fb010000af010000"
         "1101000095010000af010000f3010000770100001b0100006b010000370100005701000087010000"},
    {"<i8", "<i2", R"(2.5)", R"(4)",
         "03000000000000001a00000000000000190000000000000020000000000000002a00000000000000"
         "f9ffffffffffffffd4ffffffffffffff1a0000000000000028000000000000000000000000000000"
         "e5fffffffffffffff4ffffffffffffffd4fffffffffffffffdffffffffffffffd3ffffffffffffff"
         "3100000000000000ffffffffffffffff1900000000000000eaffffffffffffff0100000000000000"
         "00000000000000003200000000000000310000000000000010000000000000001f00000000000000"
         "08000000000000002a0000000000000011000000000000002600000000000000fcffffffffffffff"
         "1a00000000000000d5fffffffffffffff5fffffffffffffffcffffffffffffff2c00000000000000"
         "e9fffffffffffffff8ffffffffffffff2e0000000000000013000000000000001800000000000000",
         "02005e005a0076009e00daff46ff5e009600f6ff8affc6ff46ffeaff42ffba00f2ff5a009efffaff"
         "f6ffbe00ba003600720016009e003a008e00e6ff5e004affcaffe6ffa6009affd6ffae0042005600",
         "61b636c6a7d1539e446b353a889317ae67bd6bf9d78b508a1e4d2746fe4b974aeaf56375c313793d"
         "a2cae2e4dc75ded4a1736a73ee68a2abe1616d97f17acbc2b7721f627f21cc176552de3161325ca2",
         "9bedffffffffffff90f1ffffffffffff6df4ffffffffffff98e7ffffffffffffd31a000000000000"
         "8f0e000000000000e5e4ffffffffffff89ebffffffffffff5defffffffffffff5efeffffffffffff"
         "f9e2ffffffffffff97e2ffffffffffff4a130000000000008c110000000000000213000000000000"
         "a8120000000000007dfdffffffffffff5b1d000000000000f304000000000000600f000000000000"
         "abf2ffffffffffff3bf9ffffffffffff791d0000000000003af5ffffffffffffea1c000000000000"
         "dd1c0000000000003e1a000000000000ebeaffffffffffff7a18000000000000dee5ffffffffffff"
         "be1e000000000000b6f0ffffffffffffb01c0000000000008a180000000000006208000000000000"
         "f5050000000000009b140000000000007a0c0000000000009a0c0000000000009ae8ffffffffffff"},
    {"<f8", "<f4", R"(1)", R"(3)",
         "cdccccccccccf03f666666666666f23f000000000000f43f666666666666ee3f333333333333eb3f"
         "9a9999999999f53f4b9dd6d361b702403ee7bd2ed4a0f2bfe767fddf750e1240710996f8345316c0"
         "e8ad0acace4af83f5714b1c188590040170cff2644cbff3f867019319e19ee3fce9c3930a4e91340"
         "82aff8f896371d407c0388165c4feabfde7f466d820a13c005d2cef55a6102c02a55a0fd0392f7bf"
         "a27c0d0f3dc8e13ff7a200d7c081e93f348d28161cc91040f45fdce5a258d4bfd104a9ee4e3ceb3f"
         "b6fbf54c93a9f43f10d387ecacc0fabf80cd2ead736b823f22f04ec49e742240359f1f1842e8e53f"
         "da9f5cc4b5d0febf8050f684484816c066deb2ca1b4a1040003af7ca7e387cbf125c2101d027eebf"
         "d2135488c69520400c2160d4f204154073bb68ed36b410c050081ade9d92b5bfda8bd3aeac9c0f40",
         "00000000000000000000803f00000080000000800000803f000080400000c0c0000030410000a0c1"
         "0000004000004040000040400000008000004041000098410000a0c0000088c1000020c10000e0c0"
         "000080bf000080bf00002041000080c0000000800000803f000000c1000040c00000c841000080bf"
         "000010c10000a0c100001041000040c00000c0c00000b04100005041000080c1000040c000001041",
         "1d304d4432e38cc40543dc44d479e5447d588cc4908adec40ab6afc409b22244f1c58444c46a2743"
         "bf3d19c45a4ddec250500844a9159ac4be9ad6c4683ad3c2dda9974447d72943c7a12c437c0f2ec4"
         "d16f60447046d8c449dcb0c209551ac4acac32c3360c6ec402a834443619d1c2d81d1cc4953af043"
         "8d30a3c2c28609c429611bc4ee8e3a4438fc72c4b0b07fc3d23d97c3aa698b436d7564c3cd930445",
         "000000c05729714000000000336b77c000000020eb628240000000607c278340000000e0145477c0"
         "000000008c8382c0000000a001397dc000000020ac3d6b4000000080fd307640000000a020674c40"
         "000000804a6a69c000000020720642c0000000600dd86640000000e0469e79c0000000803ada81c0"
         "00000060331a41c000000020fa567940000000e08bce4c4000000020a1454d40000000a094e26cc0"
         "00000020fcc37240000000a0defd81c0000000200c7a3cc0000000e0d69869c00000000072474dc0"
         "000000e059c673c000000060003c6e4000000080c4ec40c000000060f9e469c0000000c0e1246440"
         "00000020c2323ac000000000cbcb66c0000000e086c569c000000060d2376f4000000060af2f74c0"
         "00000060b90e55c000000060f8f458c000000000477c574000000020c9c952c000000020a2208640"},
    {"<f4", "<u2", R"(273.15)", R"(100)",
         "9a99884366a6884333b38843cd8c88430080884300c08843c3718643d28d8943d348894331908843"
         "37698743b14a8743b5a98843a5638743e6968543edcd85434eb78943d5c08943084b8943e8978843"
         "2a188943a8448943a2e7884359578743436e8743d6cd8643b2c28843230c8743144c884368828a43"
         "4ef987431eff894346e18a4342ce85437b64864360418943d17b8743e95989437f9c89430dc88743",
         "05000f001900fbfff1ff230056fec4008e00feff17fffffe120013ffabfdd6fde400ec0090000400"
         "68008b00420009ff1bff9efe2500cefec8ff830188ff1c01cd01d6fd4cfe880026ff9b00cf0061ff",
         "c182301ed9fdc58c00d0cfcccfc4296e30d2e88c73d024bf68b5ff1ca6c89c94b29553c5aaaa9962"
         "0dcf6c2d1c4acf9d8856f303b7736c9f0e7f756555a0924a197f76d6497eaa3d34ee2fac169964e1",
         "52f817440a37af4300c0664448611e4452684944715d4744b83e42443dca0a44b8ce4a44ae771e44"
         "ecb14944149e3e4433633844a4b0ad43d7b34444c3652344ae1724443393424433833144d7630344"
         "cdcc48440ab7c2435c6fe743f6482944c355f74348a18d4352580e4448512a443d9a154452380544"
         "66e62a446606e84348a11544e18a4d44291c15444881d743cdbc5c44297c3244334326449a895444"},
};

TEST(FixedScaleOffsetCodecTest, MatchesNumcodecs) {
  for (const FsoCase& c : kCases) {
    SCOPED_TRACE(std::string(c.dtype) + " -> " + c.astype + " offset " + c.offset + " scale " +
                 c.scale);
    const DataType dtype = TypeOf(c.dtype), astype = TypeOf(c.astype);
    nlohmann::json config = {{"dtype", c.dtype},
                             {"astype", c.astype},
                             {"offset", nlohmann::json::parse(c.offset)},
                             {"scale", nlohmann::json::parse(c.scale)}};
    auto codec = MakeFixedScaleOffsetCodec(config, Representation(dtype, {40}));
    ASSERT_TRUE(codec.ok()) << codec.status().ToString();
    EXPECT_EQ((*codec)->encoded_representation().data_type, astype);
    std::vector<std::byte> encoded(40 * DataTypeSize(astype)), decoded(40 * DataTypeSize(dtype));
    ASSERT_TRUE((*codec)->Encode(Native(FromHex(c.x), dtype), encoded).ok());
    EXPECT_EQ(encoded, Native(FromHex(c.enc), astype)) << "encode";
    ASSERT_TRUE((*codec)->Decode(Native(FromHex(c.enc_in), astype), decoded).ok());
    EXPECT_EQ(decoded, Native(FromHex(c.dec), dtype)) << "decode";
    EXPECT_EQ((*codec)->ToJson()["configuration"], config);
  }
}

TEST(FixedScaleOffsetCodecTest, EncodedFillValue) {
  ChunkRepresentation decoded = Representation(DataType::kFloat64, {4});
  const double fill = 1001.5;
  std::memcpy(decoded.fill_value.data(), &fill, 8);
  auto codec = MakeFixedScaleOffsetCodec(
      {{"dtype", "<f8"}, {"astype", "|u1"}, {"offset", 1000}, {"scale", 10}}, decoded);
  ASSERT_TRUE(codec.ok());
  EXPECT_EQ((*codec)->encoded_representation().fill_value, std::vector<std::byte>{std::byte{15}});
}

TEST(FixedScaleOffsetCodecTest, Configuration) {
  auto f8 = Representation(DataType::kFloat64, {4});
  const nlohmann::json good = {{"dtype", "<f8"}, {"astype", "<i2"}, {"offset", 0}, {"scale", 1}};
  EXPECT_TRUE(MakeFixedScaleOffsetCodec(good, f8).ok());
  for (const char* field : {"dtype", "offset", "scale"}) {
    nlohmann::json missing = good;
    missing.erase(field);
    auto status = MakeFixedScaleOffsetCodec(missing, f8).status();
    EXPECT_TRUE(IsMetadataError(status)) << field;
    EXPECT_NE(status.message().find(field), std::string::npos) << status.message();
  }
  nlohmann::json bad = good;
  bad["scale"] = "ten";
  EXPECT_TRUE(IsMetadataError(MakeFixedScaleOffsetCodec(bad, f8).status()));
  bad = good;
  bad["dtype"] = "<f4";
  EXPECT_TRUE(IsMetadataError(MakeFixedScaleOffsetCodec(bad, f8).status()));
  bad = good;
  bad["id"] = "fixedscaleoffset";
  EXPECT_TRUE(IsMetadataError(MakeFixedScaleOffsetCodec(bad, f8).status()));
  bad = good;
  bad["astype"] = "<c8";
  EXPECT_EQ(MakeFixedScaleOffsetCodec(bad, f8).status().code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace zarrstream
