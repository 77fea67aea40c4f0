// Which chains the GPU decodes and how their framing comes off (any machine), and on a GPU: every
// compression decoded by nvCOMP in one wave equals what the CPU chain decodes, a corrupt frame is
// rejected rather than trusted, zlib's Adler-32 (our kernel) and gzip's CRC-32 (nvCOMP's) equal
// zlib's and reject a chunk whose decoded bytes do not match them, and uploads land where they
// say.
#include "gpu/gpu_decoder.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "codec/codec_registry.h"
#include "codec/codec_test_harness.h"
#include "gpu/cuda_driver.h"
#include "gpu/gpu_kernels.h"

namespace zarrstream {
namespace {

const ChunkRepresentation kChunk = testing::Representation(DataType::kFloat32, {64, 1024});

std::shared_ptr<const CodecChain> Chain(const std::vector<CodecSpec>& specs,
                                        const ChunkRepresentation& chunk = kChunk) {
  auto chain = CodecChain::Make(specs, chunk);
  EXPECT_TRUE(chain.ok()) << chain.status().ToString();
  return chain.ok() ? *chain : nullptr;
}

CodecSpec Bytes(const char* endian = "little") { return {"bytes", {{"endian", endian}}}; }
CodecSpec Zstd() { return {"zstd", {{"level", 3}, {"checksum", false}}}; }
CodecSpec Gzip() { return {"gzip", {{"level", 5}}}; }
CodecSpec Zlib() { return {"numcodecs.zlib", {{"level", 5}}}; }
CodecSpec Lz4() { return {"numcodecs.lz4", {{"acceleration", 1}}}; }
CodecSpec Crc32c() { return {"crc32c", nlohmann::json::object()}; }
CodecSpec Blosc() {
  return {
      "blosc",
      {{"cname", "lz4"}, {"clevel", 5}, {"shuffle", "shuffle"}, {"typesize", 4}, {"blocksize", 0}}};
}

CodecSpec BloscWith(const char* cname, const char* shuffle, int blocksize = 0) {
  return {"blosc",
          {{"cname", cname},
           {"clevel", 5},
           {"shuffle", shuffle},
           {"typesize", 4},
           {"blocksize", blocksize}}};
}

// The plan of `specs`, for chunks of kChunk.
GpuDecodePlan Plan(const std::vector<CodecSpec>& specs) {
  auto chain = Chain(specs);
  return chain ? PlanGpuDecode(*chain) : GpuDecodePlan{};
}

TEST(PlanGpuDecodeTest, AcceptsOneCompressorWithOptionalChecksum) {
  GpuDecodePlan zstd = Plan({Bytes(), Zstd()});
  ASSERT_TRUE(zstd.gpu());
  EXPECT_EQ(zstd.codec->compression, GpuCompression::kZstd);
  EXPECT_EQ(zstd.codec->framing, GpuChunkCodec::Framing::kNone);
  EXPECT_FALSE(zstd.codec->crc32c);
  EXPECT_FALSE(zstd.codec->big_endian);
  EXPECT_EQ(zstd.codec->decoded_bytes, kChunk.num_bytes());
  EXPECT_EQ(zstd.description, "zstd");

  GpuDecodePlan gzip = Plan({Bytes(), Gzip()});
  ASSERT_TRUE(gzip.gpu());
  EXPECT_EQ(gzip.codec->compression, GpuCompression::kGzip);
  EXPECT_EQ(gzip.description, "gzip");

  GpuDecodePlan zlib = Plan({Bytes(), Zlib()});
  ASSERT_TRUE(zlib.gpu());
  EXPECT_EQ(zlib.codec->compression, GpuCompression::kDeflate);
  EXPECT_EQ(zlib.codec->framing, GpuChunkCodec::Framing::kZlib);
  EXPECT_EQ(zlib.description, "zlib");

  GpuDecodePlan lz4 = Plan({Bytes(), Lz4(), Crc32c()});
  ASSERT_TRUE(lz4.gpu());
  EXPECT_EQ(lz4.codec->compression, GpuCompression::kLz4);
  EXPECT_EQ(lz4.codec->framing, GpuChunkCodec::Framing::kLz4SizePrefix);
  EXPECT_TRUE(lz4.codec->crc32c);
  EXPECT_EQ(lz4.description, "lz4 + crc32c");

  // Stored as they are: the GPU copies them (checking a crc32c on the CPU).
  GpuDecodePlan raw = Plan({Bytes(), Crc32c()});
  ASSERT_TRUE(raw.gpu());
  EXPECT_FALSE(raw.codec->compression.has_value());
  EXPECT_FALSE(raw.codec->blosc);
  EXPECT_TRUE(raw.codec->crc32c);
  EXPECT_EQ(raw.description, "stored + crc32c");
  EXPECT_EQ(Plan({Bytes()}).description, "stored");
}

TEST(PlanGpuDecodeTest, BigEndianElementsAreSwappedByTheScatter) {
  GpuDecodePlan zlib = Plan({Bytes("big"), Zlib(), Crc32c()});
  ASSERT_TRUE(zlib.gpu());
  EXPECT_TRUE(zlib.codec->big_endian);
  EXPECT_TRUE(zlib.codec->crc32c);
  EXPECT_EQ(zlib.description, "zlib + crc32c, big-endian");
}

TEST(PlanGpuDecodeTest, BloscWithLz4OrZstdAndNoOrByteShuffle) {
  GpuDecodePlan lz4 = Plan({Bytes(), Blosc()});
  ASSERT_TRUE(lz4.gpu());
  EXPECT_TRUE(lz4.codec->blosc);
  EXPECT_FALSE(lz4.codec->compression.has_value());  // found per frame (GpuChunkCodec::Parse)
  EXPECT_EQ(lz4.description, "blosc with lz4 and byte shuffle");
  EXPECT_EQ(Plan({Bytes(), BloscWith("zstd", "noshuffle")}).description, "blosc with zstd");
  EXPECT_EQ(Plan({Bytes(), BloscWith("lz4hc", "shuffle"), Crc32c()}).description,
            "blosc with lz4hc and byte shuffle + crc32c");

  for (const auto& [specs, reason] : std::vector<std::pair<std::vector<CodecSpec>, std::string>>{
           {{Bytes(), BloscWith("lz4", "bitshuffle")}, "blosc with bitshuffle"},
           {{Bytes(), BloscWith("zstd", "bitshuffle")}, "blosc with bitshuffle"},
           {{Bytes(), BloscWith("blosclz", "shuffle")},
            "blosc with blosclz (nvCOMP decodes lz4 and zstd inside blosc)"},
           {{Bytes(), BloscWith("zlib", "noshuffle")},
            "blosc with zlib (nvCOMP decodes lz4 and zstd inside blosc)"}}) {
    const GpuDecodePlan plan = Plan(specs);
    EXPECT_FALSE(plan.gpu()) << reason;
    EXPECT_EQ(plan.description, reason);
  }
}

TEST(PlanGpuDecodeTest, NamesWhyTheCpuDecodesOtherChains) {
  const CodecSpec f_order = {"transpose", {{"order", {1, 0}}}};
  for (const auto& [specs, reason] : std::vector<std::pair<std::vector<CodecSpec>, std::string>>{
           // v2's order F: what the zlib F-order store is.
           {{f_order, Bytes("big"), Zlib()}, "transpose codec (v2 order F, or a v3 transpose)"},
           {{{"numcodecs.delta", {{"dtype", "<f4"}}}, Bytes(), Zstd()},
            "delta filter (an array-to-array codec)"},
           {{{"numcodecs.astype", {{"encode_dtype", "<f2"}}}, Bytes(), Zstd()},
            "astype filter between two data types (a cast)"},
           {{{"numcodecs.bitround", {{"keepbits", 5}}},
             {"numcodecs.quantize", {{"digits", 2}, {"dtype", "<f4"}, {"astype", "<f2"}}},
             Bytes(),
             Zstd()},
            "quantize filter between two data types (a cast)"},
           // nvCOMP does not verify zstd's content checksums; the CPU decoder does.
           {{Bytes(), {"zstd", {{"level", 3}, {"checksum", true}}}},
            "zstd with content checksums (nvCOMP does not verify them)"},
           {{Bytes(), {"numcodecs.bz2", {{"level", 5}}}}, "bz2 (no GPU decoder)"},
           {{Bytes(), {"numcodecs.shuffle", {{"elementsize", 4}}}, Zstd()},
            "shuffle (no GPU decoder)"},
           {{Bytes(), Zstd(), Gzip()},
            "gzip after zstd (the GPU decodes one compressor, then crc32c)"},
           {{Bytes(), Crc32c(), Zstd()},
            "zstd after crc32c (the GPU decodes one compressor, then crc32c)"}}) {
    const GpuDecodePlan plan = Plan(specs);
    EXPECT_FALSE(plan.gpu()) << reason;
    EXPECT_EQ(plan.description, reason);
  }
}

TEST(PlanGpuDecodeTest, FiltersThatDecodeToTheirInputAreSkipped) {
  // bitround's decoder returns the stored floats; so do quantize's and astype's between equal
  // types. The plan is the rest of the chain's, for the same decoded size.
  GpuDecodePlan plan = Plan({{"numcodecs.bitround", {{"keepbits", 5}}},
                             {"numcodecs.quantize", {{"digits", 2}, {"dtype", "<f4"}}},
                             {"numcodecs.astype", {{"encode_dtype", "float32"}}},
                             Bytes(),
                             Zstd()});
  ASSERT_TRUE(plan.gpu()) << plan.description;
  EXPECT_EQ(plan.description, "zstd");
  EXPECT_EQ(plan.codec->decoded_bytes, kChunk.num_bytes());
}

CodecSpec Sharding(const std::vector<CodecSpec>& inner, const std::vector<uint64_t>& inner_shape) {
  nlohmann::json codecs = nlohmann::json::array();
  for (const CodecSpec& spec : inner) {
    codecs.push_back({{"name", spec.name}, {"configuration", spec.configuration}});
  }
  return {"sharding_indexed",
          {{"chunk_shape", inner_shape},
           {"codecs", codecs},
           {"index_codecs",
            {{{"name", "bytes"}, {"configuration", {{"endian", "little"}}}}, {{"name", "crc32c"}}}},
           {"index_location", "end"}}};
}

TEST(PlanGpuDecodeTest, ShardedArraysAreAnsweredForTheirInnerChunks) {
  // Reads fetch a shard's inner chunks one by one: the plan is the inner chain's, for their size.
  GpuDecodePlan sharded = Plan({Sharding({Bytes(), Zstd(), Crc32c()}, {16, 1024})});
  ASSERT_TRUE(sharded.gpu());
  EXPECT_EQ(sharded.codec->compression, GpuCompression::kZstd);
  EXPECT_TRUE(sharded.codec->crc32c);
  EXPECT_EQ(sharded.codec->decoded_bytes, 16 * 1024 * sizeof(float));
  EXPECT_EQ(sharded.description, "zstd + crc32c");

  EXPECT_EQ(Plan({Sharding({Bytes(), BloscWith("lz4", "bitshuffle")}, {16, 1024})}).description,
            "blosc with bitshuffle");
  EXPECT_EQ(Plan({Sharding({Sharding({Bytes(), Zstd()}, {4, 1024})}, {16, 1024})}).description,
            "nested sharding (shards inside inner chunks)");
  // A shard with codecs after it is read and decoded whole.
  GpuDecodePlan wrapped = Plan({Sharding({Bytes(), Zstd()}, {16, 1024}), Crc32c()});
  EXPECT_FALSE(wrapped.gpu());
  EXPECT_EQ(wrapped.description, "sharding with codecs after it (each shard decodes whole)");
}

// A codec registered at run time that says nothing of what it is (no CodecTraits): a copy.
class OpaqueCodec final : public BytesToBytesCodec {
 public:
  Status Decode(std::span<const std::byte> encoded, DecodedSize /*size*/,
                ByteBuffer* decoded) const override {
    return Copy(encoded, decoded);
  }
  Status Encode(std::span<const std::byte> decoded, ByteBuffer* encoded) const override {
    return Copy(decoded, encoded);
  }
  nlohmann::json ToJson() const override { return {{"name", "test.opaque"}}; }

 private:
  static Status Copy(std::span<const std::byte> in, ByteBuffer* out) {
    out->Resize(in.size());
    if (!in.empty()) std::memcpy(out->data(), in.data(), in.size());
    return Status::Ok();
  }
};

TEST(PlanGpuDecodeTest, CodecsRegisteredAtRunTimeAreLeftToTheCpu) {
  RegisterCodec({"test.opaque",
                 CodecKind::kBytesToBytes,
                 {},
                 {},
                 [](const nlohmann::json&,
                    const ChunkRepresentation&) -> Result<std::unique_ptr<BytesToBytesCodec>> {
                   return std::unique_ptr<BytesToBytesCodec>(new OpaqueCodec);
                 }});
  const GpuDecodePlan plan = Plan({Bytes(), {"test.opaque", nlohmann::json::object()}});
  EXPECT_FALSE(plan.gpu());
  EXPECT_EQ(plan.description, "a codec registered at run time (no GPU decoder)");
}

// Encodes `data` with `chain` (the CPU codecs, which the fixtures elsewhere check against
// zarr-python).
std::vector<std::byte> Encode(const CodecChain& chain, std::span<const std::byte> data) {
  ByteBuffer out;
  EXPECT_TRUE(chain.Encode(data, &out).ok());
  return std::vector<std::byte>(out.span().begin(), out.span().end());
}

TEST(GpuChunkCodecTest, PayloadChecksAndStripsTheFraming) {
  const std::vector<std::byte> data = testing::FieldBytes(kChunk.num_bytes());
  auto lz4_chain = Chain({Bytes(), Lz4(), Crc32c()});
  const GpuChunkCodec lz4 = *PlanGpuDecode(*lz4_chain).codec;
  std::vector<std::byte> stored = Encode(*lz4_chain, data);
  auto payload = lz4.Payload(stored);
  ASSERT_TRUE(payload.ok()) << payload.status().ToString();
  EXPECT_EQ(payload->size(), stored.size() - 8);  // size prefix and checksum off
  EXPECT_EQ(payload->data(), stored.data() + 4);

  stored[stored.size() / 2] ^= std::byte{1};
  EXPECT_EQ(lz4.Payload(stored).status().code(), ErrorCode::kCorruptChunk);

  auto zlib_chain = Chain({Bytes(), Zlib()});
  const GpuChunkCodec zlib = *PlanGpuDecode(*zlib_chain).codec;
  stored = Encode(*zlib_chain, data);
  payload = zlib.Payload(stored);
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(payload->size(), stored.size() - 6);  // header and Adler-32 off
  stored[0] = std::byte{0x79};                    // not deflate
  EXPECT_EQ(zlib.Payload(stored).status().code(), ErrorCode::kCorruptChunk);
  stored[0] = std::byte{0x88};  // deflate with a 64 KiB window, which RFC 1950 does not allow
  stored[1] = std::byte{0x98};  // (the header's check bits still right)
  EXPECT_EQ(zlib.Payload(stored).status().code(), ErrorCode::kCorruptChunk);

  const GpuChunkCodec raw = *PlanGpuDecode(*Chain({Bytes()})).codec;
  EXPECT_TRUE(raw.Payload(data).ok());
  EXPECT_EQ(raw.Payload(std::span(data).first(100)).status().code(), ErrorCode::kCorruptChunk);
}

uint32_t ZlibAdler32(std::span<const std::byte> data) {
  return static_cast<uint32_t>(
      adler32_z(adler32(0, nullptr, 0), reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

uint32_t ZlibCrc32(std::span<const std::byte> data) {
  return static_cast<uint32_t>(
      crc32_z(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

TEST(GpuChunkCodecTest, ParseCarriesTheStoredChecksumsAndChecksGzipsSize) {
  const std::vector<std::byte> data = testing::FieldBytes(kChunk.num_bytes());
  auto zlib_chain = Chain({Bytes(), Zlib()});
  const GpuChunkCodec zlib = *PlanGpuDecode(*zlib_chain).codec;
  auto parse = zlib.Parse(Encode(*zlib_chain, data));
  ASSERT_TRUE(parse.ok()) << parse.status().ToString();
  ASSERT_TRUE(parse->streams[0].checksum.has_value());
  EXPECT_EQ(parse->streams[0].checksum->kind, GpuChecksum::Kind::kAdler32);
  EXPECT_EQ(parse->streams[0].checksum->expected, ZlibAdler32(data));

  auto gzip_chain = Chain({Bytes(), Gzip(), Crc32c()});
  const GpuChunkCodec gzip = *PlanGpuDecode(*gzip_chain).codec;
  std::vector<std::byte> stored = Encode(*gzip_chain, data);
  parse = gzip.Parse(stored);
  ASSERT_TRUE(parse.ok()) << parse.status().ToString();
  ASSERT_TRUE(parse->streams[0].checksum.has_value());
  EXPECT_EQ(parse->streams[0].checksum->kind, GpuChecksum::Kind::kCrc32);
  EXPECT_EQ(parse->streams[0].checksum->expected, ZlibCrc32(data));

  // ISIZE (the 4 bytes before crc32c's) says another size: refused before the GPU.
  auto plain_gzip_chain = Chain({Bytes(), Gzip()});
  stored = Encode(*plain_gzip_chain, data);
  stored[stored.size() - 2] ^= std::byte{0x10};
  const GpuChunkCodec plain_gzip = *PlanGpuDecode(*plain_gzip_chain).codec;
  EXPECT_EQ(plain_gzip.Parse(stored).status().code(), ErrorCode::kCorruptChunk);
  CodecScratch scratch;
  std::vector<std::byte> cpu(data.size());
  EXPECT_EQ(plain_gzip_chain->Decode(stored, cpu, &scratch).code(), ErrorCode::kCorruptChunk);
  EXPECT_EQ(plain_gzip.Parse(std::span(stored).first(17)).status().code(),
            ErrorCode::kCorruptChunk);

  for (const auto& specs :
       std::vector<std::vector<CodecSpec>>{{Bytes(), Zstd()}, {Bytes(), Lz4()}}) {
    auto chain = Chain(specs);
    parse = PlanGpuDecode(*chain).codec->Parse(Encode(*chain, data));
    ASSERT_TRUE(parse.ok());
    EXPECT_FALSE(parse->streams[0].checksum.has_value());
  }
}

// Device memory holding `cases` back to back, each starting `misalignment` bytes past a 256-byte
// boundary, and a stream for the test's launches; freed at the end of the test.
class DeviceCases {
 public:
  DeviceCases(const CudaDriver* driver, const std::vector<std::vector<std::byte>>& cases,
              uint64_t misalignment)
      : driver_(driver) {
    uint64_t total = 0;
    for (const auto& c : cases) {
      offsets_.push_back(total + misalignment);
      total = (total + misalignment + c.size() + 255) / 256 * 256;
    }
    auto memory = driver->AllocateDevice(std::max<uint64_t>(total, 1));
    EXPECT_TRUE(memory.ok()) << memory.status().ToString();
    memory_ = memory.ok() ? *memory : 0;
    auto stream = driver->CreateStream();
    EXPECT_TRUE(stream.ok());
    stream_ = stream.ok() ? *stream : nullptr;
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_TRUE(
          driver->CopyToDevice(memory_ + offsets_[i], cases[i].data(), cases[i].size(), stream_)
              .ok());
    }
  }
  ~DeviceCases() {
    (void)driver_->SynchronizeStream(stream_);
    for (uint64_t a : allocations_) driver_->FreeDevice(a);
    driver_->FreeDevice(memory_);
    driver_->DestroyStream(stream_);
  }
  uint64_t address(size_t i) const { return memory_ + offsets_[i]; }
  void* stream() const { return stream_; }
  // Device memory holding `bytes`, freed with this.
  template <typename T>
  uint64_t Copy(const std::vector<T>& values) {
    auto memory = driver_->AllocateDevice(std::max<size_t>(values.size() * sizeof(T), 1));
    EXPECT_TRUE(memory.ok());
    if (!memory.ok()) return 0;
    allocations_.push_back(*memory);
    EXPECT_TRUE(
        driver_->CopyToDevice(*memory, values.data(), values.size() * sizeof(T), stream_).ok());
    return *memory;
  }
  std::vector<uint32_t> Back(uint64_t address, size_t count) {
    std::vector<uint32_t> values(count);
    EXPECT_TRUE(driver_->CopyToHost(values.data(), address, count * 4, stream_).ok());
    EXPECT_TRUE(driver_->SynchronizeStream(stream_).ok());
    return values;
  }

 private:
  const CudaDriver* driver_;
  uint64_t memory_ = 0;
  void* stream_ = nullptr;
  std::vector<uint64_t> offsets_;
  std::vector<uint64_t> allocations_;
};

// The checksum cases: zlib's block boundaries (5552 bytes between its reductions), the 16-byte
// words the kernel reads (sizes not a multiple of them), tens of MB, and all 0xFF bytes, the
// largest sums a stream of its size can have.
std::vector<std::vector<std::byte>> ChecksumCases() {
  std::vector<std::vector<std::byte>> cases;
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{17}, size_t{5551}, size_t{5552},
                   size_t{65536}, size_t{65537}, size_t{10} << 20, (size_t{32} << 20) + 7}) {
    cases.push_back(testing::RandomBytes(n, static_cast<uint32_t>(n)));
  }
  cases.emplace_back((size_t{24} << 20) + 3, std::byte{0xFF});
  return cases;
}

TEST(GpuChecksumGpuTest, Adler32KernelEqualsZlibAtAnyAlignment) {
  const CudaDriver* driver = CudaDriver::Get();
  if (driver == nullptr) GTEST_SKIP() << "GPU test skipped: " << CudaDriver::UnavailableReason();
  auto kernels = GpuKernels::ForDevice(driver);
  ASSERT_TRUE(kernels.ok()) << kernels.status().ToString();
  const std::vector<std::vector<std::byte>> cases = ChecksumCases();
  for (uint64_t misalignment : {0, 1, 7, 15}) {
    SCOPED_TRACE(misalignment);
    DeviceCases device(driver, cases, misalignment);
    std::vector<gpu_abi::ChecksumDescriptor> descriptors;
    for (size_t i = 0; i < cases.size(); ++i)
      descriptors.push_back({device.address(i), cases[i].size()});
    const uint64_t d = device.Copy(descriptors);
    const uint64_t results = device.Copy(std::vector<uint32_t>(cases.size(), 0));
    ASSERT_TRUE(
        (*kernels)->Adler32(d, static_cast<uint32_t>(cases.size()), results, device.stream()).ok());
    const std::vector<uint32_t> got = device.Back(results, cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(got[i], ZlibAdler32(cases[i])) << cases[i].size() << " bytes";
    }
  }
}

TEST(GpuChecksumGpuTest, NvcompCrc32EqualsZlibAtAnyAlignment) {
  const CudaDriver* driver = CudaDriver::Get();
  if (driver == nullptr) GTEST_SKIP() << "GPU test skipped: " << CudaDriver::UnavailableReason();
  const Nvcomp* nvcomp = Nvcomp::Get();
  ASSERT_NE(nvcomp, nullptr) << Nvcomp::UnavailableReason();
  ASSERT_TRUE(nvcomp->has_crc32())
      << "nvCOMP " << nvcomp->version() << " has no nvcompBatchedCRC32Async";
  const std::vector<std::vector<std::byte>> cases = ChecksumCases();
  for (uint64_t misalignment : {0, 3}) {
    SCOPED_TRACE(misalignment);
    DeviceCases device(driver, cases, misalignment);
    std::vector<uint64_t> arguments;  // addresses, then sizes
    size_t max_bytes = 0;
    for (size_t i = 0; i < cases.size(); ++i) arguments.push_back(device.address(i));
    for (const auto& c : cases) {
      arguments.push_back(c.size());
      max_bytes = std::max(max_bytes, c.size());
    }
    const auto* args = reinterpret_cast<const uint64_t*>(device.Copy(arguments));
    const uint64_t results = device.Copy(std::vector<uint32_t>(cases.size(), 0));
    ASSERT_TRUE(nvcomp
                    ->Crc32Async(*driver, args, args + cases.size(), cases.size(), max_bytes,
                                 reinterpret_cast<uint32_t*>(results), device.stream())
                    .ok());
    const std::vector<uint32_t> got = device.Back(results, cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(got[i], ZlibCrc32(cases[i])) << cases[i].size() << " bytes";
    }
  }
}

// Where the deflate stream of `stored` (zlib or gzip at level 0: stored blocks) keeps the chunk's
// bytes as they are, one of them flipped: the stream still decodes to the chunk's size, and only
// the checksum tells.
std::vector<std::byte> FlipStoredByte(std::vector<std::byte> stored,
                                      std::span<const std::byte> data) {
  const std::byte* at = std::search(stored.data(), stored.data() + stored.size(),
                                    data.data() + 1000, data.data() + 1064);
  EXPECT_NE(at, stored.data() + stored.size()) << "the data is not stored as it is";
  stored[at - stored.data() + 7] ^= std::byte{0x04};
  return stored;
}

// GPU: in one wave of zlib, gzip and zstd chunks, a single bit flipped in the deflate data (where
// it still decodes to the chunk's size) or in the checksum trailer rejects exactly that chunk, as
// the CPU refuses it; intact chunks pass.
TEST(GpuDecodeWorkspaceGpuTest, ChecksumMismatchesRejectTheChunk) {
  const CudaDriver* driver = CudaDriver::Get();
  if (driver == nullptr) GTEST_SKIP() << "GPU test skipped: " << CudaDriver::UnavailableReason();
  const Nvcomp* nvcomp = Nvcomp::Get();
  ASSERT_NE(nvcomp, nullptr) << Nvcomp::UnavailableReason();
  ASSERT_TRUE(nvcomp->has_crc32());
  auto workspace = GpuDecodeWorkspace::Create(driver, nvcomp);
  ASSERT_TRUE(workspace.ok());
  GpuDecodeWorkspace& w = **workspace;
  const std::vector<std::byte> data = testing::RandomBytes(kChunk.num_bytes(), 5);
  auto zlib_chain = Chain({Bytes(), {"numcodecs.zlib", {{"level", 0}}}});
  auto gzip_chain = Chain({Bytes(), {"gzip", {{"level", 0}}}});
  auto zstd_chain = Chain({Bytes(), Zstd()});
  struct Case {
    const CodecChain* chain;
    std::vector<std::byte> stored;
    bool damaged;
  };
  std::vector<Case> cases;
  for (const CodecChain* chain : {zlib_chain.get(), gzip_chain.get()}) {
    const std::vector<std::byte> good = Encode(*chain, data);
    std::vector<std::byte> trailer = good;  // a bit of the Adler-32, or of gzip's CRC-32
    trailer[trailer.size() - (chain == gzip_chain.get() ? 6 : 2)] ^= std::byte{0x20};
    cases.push_back({chain, good, false});
    cases.push_back({chain, FlipStoredByte(good, data), true});
    cases.push_back({chain, trailer, true});
  }
  cases.push_back({zstd_chain.get(), Encode(*zstd_chain, data), false});
  std::swap(cases[1], cases[4]);  // kinds interleaved in the wave
  ASSERT_TRUE(w.Begin(cases.size(), 0, cases.size() * data.size()).ok());
  for (size_t i = 0; i < cases.size(); ++i) {
    const GpuChunkCodec codec = *PlanGpuDecode(*cases[i].chain).codec;
    auto parse = codec.Parse(cases[i].stored);
    ASSERT_TRUE(parse.ok()) << i << ": " << parse.status().ToString();
    w.Stage(i, *parse, codec.decoded_bytes);
  }
  ASSERT_TRUE(w.Decode().ok());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(w.Rejected(i), cases[i].damaged);
    std::vector<std::byte> cpu(data.size());
    CodecScratch scratch;
    const Status status = cases[i].chain->Decode(cases[i].stored, cpu, &scratch);
    EXPECT_EQ(status.code(), cases[i].damaged ? ErrorCode::kCorruptChunk : ErrorCode::kOk)
        << status.ToString();
    if (cases[i].damaged) continue;
    std::vector<std::byte> back(data.size());
    ASSERT_TRUE(driver->CopyToHost(back.data(), w.DeviceAddress(i), back.size(), w.stream()).ok());
    ASSERT_TRUE(w.Synchronize().ok());
    EXPECT_EQ(back, data);
  }
}

// Decodes the wave staged in `w` and expects chunk i to come out as expected[i], none rejected.
void ExpectWaveDecodes(const CudaDriver& driver, GpuDecodeWorkspace& w,
                       const std::vector<std::vector<std::byte>>& expected) {
  ASSERT_TRUE(w.Decode().ok());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_FALSE(w.Rejected(i));
    std::vector<std::byte> back(expected[i].size());
    ASSERT_TRUE(driver.CopyToHost(back.data(), w.DeviceAddress(i), back.size(), w.stream()).ok());
    ASSERT_TRUE(w.Synchronize().ok());
    EXPECT_EQ(back, expected[i]);
  }
}

// GPU: a wave of chunks of every compression (and raw, and a host output), decoded at once.
TEST(GpuDecodeWorkspaceGpuTest, DecodesEveryCompressionLikeTheCpu) {
  const CudaDriver* driver = CudaDriver::Get();
  if (driver == nullptr) GTEST_SKIP() << "GPU test skipped: " << CudaDriver::UnavailableReason();
  const Nvcomp* nvcomp = Nvcomp::Get();
  ASSERT_NE(nvcomp, nullptr) << Nvcomp::UnavailableReason();
  auto workspace = GpuDecodeWorkspace::Create(driver, nvcomp);
  ASSERT_TRUE(workspace.ok()) << workspace.status().ToString();
  GpuDecodeWorkspace& w = **workspace;

  const std::vector<std::vector<CodecSpec>> chains = {
      {Bytes(), Zstd()},
      {Bytes(), Gzip()},
      {Bytes(), Zlib(), Crc32c()},
      {Bytes(), Lz4()},
      {Bytes()},
      {Bytes(), Zstd(), Crc32c()},
      {Bytes(), Blosc()},
      {Bytes(), BloscWith("zstd", "shuffle", 40000), Crc32c()},  // a short last block
      {Bytes(), BloscWith("lz4", "noshuffle")}};
  // Two rounds: the second reuses the buffers the first grew.
  for (int round = 0; round < 2; ++round) {
    const size_t n = chains.size() + 1;  // the last one is a host output
    // Round 0 declares no GPU bytes: the payloads overflow the staging, which then grows.
    ASSERT_TRUE(
        w.Begin(n, kChunk.num_bytes(), round == 0 ? 0 : chains.size() * kChunk.num_bytes()).ok());
    std::vector<std::vector<std::byte>> expected;
    for (size_t i = 0; i < chains.size(); ++i) {
      auto chain = Chain(chains[i]);
      expected.push_back(
          testing::FieldBytes(kChunk.num_bytes(), static_cast<uint32_t>(i + 10 * round)));
      const std::vector<std::byte> stored = Encode(*chain, expected.back());
      const GpuChunkCodec codec = *PlanGpuDecode(*chain).codec;
      auto parse = codec.Parse(stored);
      ASSERT_TRUE(parse.ok()) << PlanGpuDecode(*chain).description << ": "
                              << parse.status().ToString();
      w.Stage(i, *parse, codec.decoded_bytes);
    }
    expected.push_back(testing::FieldBytes(kChunk.num_bytes(), 99));
    std::span<std::byte> host = w.HostOutput(n - 1, kChunk.num_bytes());
    std::memcpy(host.data(), expected.back().data(), host.size());

    ExpectWaveDecodes(*driver, w, expected);
  }
  EXPECT_GE(w.chunks_decoded(), 2u * 7u);
}

// GPU: stored bytes read into the staging itself (StagingFor) cross as they lie, with no copy on
// the CPU, at any address: a compressed stream where nvCOMP does not take its address is moved on
// the GPU before its decode, a stored chunk off the kernels' alignment is copied into the arena;
// a staging with no room left hands out nothing, and the chunks staged after that (copied,
// overflowing) still decode.
TEST(GpuDecodeWorkspaceGpuTest, StreamsReadIntoTheStagingDecodeWhereTheyLie) {
  const CudaDriver* driver = CudaDriver::Get();
  if (driver == nullptr) GTEST_SKIP() << "GPU test skipped: " << CudaDriver::UnavailableReason();
  const Nvcomp* nvcomp = Nvcomp::Get();
  ASSERT_NE(nvcomp, nullptr) << Nvcomp::UnavailableReason();
  auto workspace = GpuDecodeWorkspace::Create(driver, nvcomp);
  ASSERT_TRUE(workspace.ok()) << workspace.status().ToString();
  GpuDecodeWorkspace& w = **workspace;

  // (chain, where its stored bytes start in the memory StagingFor gives)
  const std::vector<std::pair<std::vector<CodecSpec>, size_t>> chunks = {
      {{Bytes(), Zstd()}, 0},
      {{Bytes(), Lz4()}, 0},
      {{Bytes(), Blosc()}, 0},  // its LZ4 streams lie at the offsets the frame gives them
      {{Bytes(), BloscWith("zstd", "noshuffle")}, 3},
      {{Bytes(), Zstd(), Crc32c()}, 5},
      {{Bytes(), Lz4()}, 1},
      {{Bytes(), Gzip()}, 2},
      {{Bytes()}, 0},
      {{Bytes()}, 7},  // off the kernels' alignment: copied into the arena on the GPU
  };
  const size_t n = chunks.size();
  std::vector<std::vector<std::byte>> expected;
  std::vector<std::vector<std::byte>> stored;
  for (size_t i = 0; i < n; ++i) {
    expected.push_back(testing::FieldBytes(kChunk.num_bytes(), static_cast<uint32_t>(i + 40)));
    stored.push_back(Encode(*Chain(chunks[i].first), expected.back()));
  }
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    ASSERT_TRUE(w.Begin(n, 0, n * kChunk.num_bytes()).ok());
    const uint64_t in_place_before = w.payload_bytes_in_place();
    uint64_t read_into_staging = 0;
    std::vector<std::vector<std::byte>> elsewhere(n);
    for (size_t i = 0; i < n; ++i) {
      SCOPED_TRACE(i);
      if (round == 1 && i == n / 2) {
        // Round 1 takes all the room left halfway: StagingFor then has none, and the rest are
        // read elsewhere and copied (overflowing the staging, which grows).
        while (!w.StagingFor(uint64_t{1} << 20).empty()) {
        }
        EXPECT_TRUE(w.StagingFor(16).empty());
      }
      const size_t shift = chunks[i].second;
      std::span<std::byte> memory = w.StagingFor(stored[i].size() + shift);
      std::span<std::byte> at;
      if (memory.empty()) {
        elsewhere[i] = stored[i];
        at = elsewhere[i];
      } else {
        ASSERT_EQ(memory.size(), stored[i].size() + shift);
        at = memory.subspan(shift, stored[i].size());
        std::memcpy(at.data(), stored[i].data(), stored[i].size());
        ++read_into_staging;
      }
      const GpuChunkCodec codec = *PlanGpuDecode(*Chain(chunks[i].first)).codec;
      auto parse = codec.Parse(at);
      ASSERT_TRUE(parse.ok()) << parse.status().ToString();
      w.Stage(i, *parse, codec.decoded_bytes);
    }
    if (round == 0) {
      EXPECT_EQ(read_into_staging, n);
      // Every stream is used where it was read, whatever its address.
      uint64_t payloads = 0;
      for (size_t i = 0; i < n; ++i) {
        auto parse = PlanGpuDecode(*Chain(chunks[i].first)).codec->Parse(stored[i]);
        for (const GpuStream& stream : parse->streams) payloads += stream.payload.size();
      }
      EXPECT_EQ(w.payload_bytes_in_place() - in_place_before, payloads);
    } else {
      EXPECT_EQ(read_into_staging, n / 2);
    }
    ExpectWaveDecodes(*driver, w, expected);
  }
}

// A blosc frame's streams tile the chunk: every byte of it is some stream's output, once.
TEST(GpuChunkCodecTest, BloscFramesParseIntoStreamsThatTileTheChunk) {
  for (const CodecSpec& spec :
       {Blosc(), BloscWith("zstd", "shuffle", 40000), BloscWith("lz4", "noshuffle", 65536)}) {
    auto chain = Chain({Bytes(), spec});
    const GpuChunkCodec codec = *PlanGpuDecode(*chain).codec;
    const std::vector<std::byte> stored = Encode(*chain, testing::FieldBytes(kChunk.num_bytes()));
    auto parse = codec.Parse(stored);
    ASSERT_TRUE(parse.ok()) << spec.configuration.dump() << ": " << parse.status().ToString();
    std::vector<int> covered(kChunk.num_bytes(), 0);
    for (const GpuStream& stream : parse->streams) {
      for (uint64_t b = 0; b < stream.output_bytes; ++b) ++covered[stream.output_offset + b];
      if (!stream.compression) {
        EXPECT_EQ(stream.payload.size(), stream.output_bytes);
      }
    }
    EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](int n) { return n == 1; }));
    EXPECT_EQ(parse->unshuffle_typesize, spec.configuration["shuffle"] == "shuffle" ? 4u : 0u);

    std::vector<std::byte> truncated(stored.begin(), stored.end() - 10);
    EXPECT_EQ(codec.Parse(truncated).status().code(), ErrorCode::kCorruptChunk);
  }
}

// Blosc headers c-blosc (the CPU decoder) refuses are refused before the GPU too, so that no chunk
// the CPU calls corrupt decodes on the GPU; flags the GPU path does not undo (the delta filter,
// bit shuffle, on compressed or stored-whole frames) leave the chunk to the CPU. Inputs found by
// fuzz/codec_decode_fuzzer.cc's comparison of the two paths.
TEST(GpuChunkCodecTest, BloscHeadersTheCpuRefusesAreRefused) {
  auto chain = Chain({Bytes(), Blosc()});
  const GpuChunkCodec codec = *PlanGpuDecode(*chain).codec;
  const std::vector<std::byte> good = Encode(*chain, testing::FieldBytes(kChunk.num_bytes()));
  ASSERT_TRUE(codec.Parse(good).ok());
  auto with = [&](size_t at, uint8_t value) {
    std::vector<std::byte> frame = good;
    frame[at] = std::byte{value};
    return frame;
  };
  auto cpu_rejects = [&](const std::vector<std::byte>& frame) {
    std::vector<std::byte> out(kChunk.num_bytes());
    CodecScratch scratch;
    return !chain->Decode(frame, out, &scratch).ok();
  };
  const std::vector<std::byte> corrupt[] = {
      with(0, 1),                                    // format version 1
      with(1, 2),                                    // lz4 format version 2
      with(11, static_cast<uint8_t>(good[11]) + 1),  // a block larger than the chunk
  };
  for (const std::vector<std::byte>& frame : corrupt) {
    EXPECT_EQ(codec.Parse(frame).status().code(), ErrorCode::kCorruptChunk);
    EXPECT_TRUE(cpu_rejects(frame));
  }
  const uint8_t flags = static_cast<uint8_t>(good[2]);
  EXPECT_EQ(codec.Parse(with(2, flags | 0x08)).status().code(), ErrorCode::kUnsupported);  // delta
  EXPECT_EQ(codec.Parse(with(2, 0x02 | 0x04 | 0x08)).status().code(), ErrorCode::kUnsupported);
  // Stored whole (flag 0x2): exactly the chunk's bytes after the header, as c-blosc requires.
  std::vector<std::byte> stored_whole(16 + 8, std::byte{7});
  const uint8_t header[16] = {2, 1, 0x33, 1, 8, 0, 0, 0, 8, 0, 0, 0, 24, 0, 0, 0};
  std::memcpy(stored_whole.data(), header, 16);
  auto small = Chain({Bytes(), Blosc()}, testing::Representation(DataType::kUInt8, {8}));
  const GpuChunkCodec small_codec = *PlanGpuDecode(*small).codec;
  EXPECT_TRUE(small_codec.Parse(stored_whole).ok());
  stored_whole.push_back(std::byte{0});
  stored_whole[12] = std::byte{25};  // the frame's size still its length, one byte too many
  EXPECT_EQ(small_codec.Parse(stored_whole).status().code(), ErrorCode::kCorruptChunk);
}

TEST(GpuChunkCodecTest, MalformedZstdFramesNeverReachTheGpu) {
  auto chain = Chain({Bytes(), Zstd()});
  const GpuChunkCodec codec = *PlanGpuDecode(*chain).codec;
  const std::vector<std::byte> good = Encode(*chain, testing::FieldBytes(kChunk.num_bytes()));
  ASSERT_TRUE(codec.Payload(good).ok());
  std::vector<std::byte> truncated(good.begin(),
                                   good.begin() + static_cast<ptrdiff_t>(good.size() / 2));
  EXPECT_EQ(codec.Payload(truncated).status().code(), ErrorCode::kCorruptChunk);
  std::vector<std::byte> trailing = good;
  trailing.push_back(std::byte{0});
  EXPECT_EQ(codec.Payload(trailing).status().code(), ErrorCode::kCorruptChunk);
  EXPECT_EQ(codec.Payload(testing::AsBytes("\x28\xb5\x2f\xfd not a zstd frame")).status().code(),
            ErrorCode::kCorruptChunk);
  // A frame with a content checksum goes to the CPU, which verifies it (nvCOMP does not), even
  // where the array's metadata does not announce checksums.
  auto checksummed = Chain({Bytes(), {"zstd", {{"level", 3}, {"checksum", true}}}});
  EXPECT_EQ(
      codec.Payload(Encode(*checksummed, testing::FieldBytes(kChunk.num_bytes()))).status().code(),
      ErrorCode::kUnsupported);
  // A frame of another chunk's size.
  auto small = Chain({Bytes(), Zstd()}, testing::Representation(DataType::kFloat32, {64}));
  EXPECT_EQ(codec.Payload(Encode(*small, testing::FieldBytes(256))).status().code(),
            ErrorCode::kCorruptChunk);
}

// GPU: well-formed frames whose contents are damaged (what passes the CPU's structural checks) are
// rejected by nvCOMP, or decode to what the CPU decodes, without touching memory outside the
// wave's buffers (compute-sanitizer checks that); the wave's good chunk decodes. Every compression.
TEST(GpuDecodeWorkspaceGpuTest, DamagedContentIsRejectedAndStaysInBounds) {
  const CudaDriver* driver = CudaDriver::Get();
  if (driver == nullptr) GTEST_SKIP() << "GPU test skipped: " << CudaDriver::UnavailableReason();
  const Nvcomp* nvcomp = Nvcomp::Get();
  ASSERT_NE(nvcomp, nullptr) << Nvcomp::UnavailableReason();
  auto workspace = GpuDecodeWorkspace::Create(driver, nvcomp);
  ASSERT_TRUE(workspace.ok());
  GpuDecodeWorkspace& w = **workspace;
  for (const auto& specs :
       std::vector<std::vector<CodecSpec>>{{Bytes(), Zstd()},
                                           {Bytes(), Lz4()},
                                           {Bytes(), Gzip()},
                                           {Bytes(), Zlib()},
                                           {Bytes(), Blosc()},
                                           {Bytes(), BloscWith("zstd", "shuffle")}}) {
    auto chain = Chain(specs);
    const GpuChunkCodec codec = *PlanGpuDecode(*chain).codec;
    SCOPED_TRACE(PlanGpuDecode(*chain).description);
    const std::vector<std::byte> data = testing::FieldBytes(kChunk.num_bytes());
    const std::vector<std::byte> good = Encode(*chain, data);
    std::vector<std::byte> damaged = good;
    for (size_t at = damaged.size() / 3; at < damaged.size() / 3 + 64; ++at) {
      damaged[at] ^= std::byte{0x5A};
    }
    auto good_parse = codec.Parse(good);
    auto damaged_parse = codec.Parse(damaged);
    ASSERT_TRUE(good_parse.ok());
    ASSERT_TRUE(w.Begin(2, 0, 2 * kChunk.num_bytes()).ok());
    w.Stage(0, *good_parse, codec.decoded_bytes);
    if (damaged_parse.ok()) {
      w.Stage(1, *damaged_parse, codec.decoded_bytes);
    } else {
      w.Reject(1);
    }
    ASSERT_TRUE(w.Decode().ok());
    EXPECT_FALSE(w.Rejected(0));
    std::vector<std::byte> back(data.size());
    ASSERT_TRUE(driver->CopyToHost(back.data(), w.DeviceAddress(0), back.size(), w.stream()).ok());
    ASSERT_TRUE(w.Synchronize().ok());
    EXPECT_EQ(back, data);
    if (!w.Rejected(1)) {
      // Decoded to the chunk's size: then the CPU decodes it too (without a checksum neither can
      // tell), and to the same bytes.
      std::vector<std::byte> cpu(data.size());
      CodecScratch scratch;
      ASSERT_TRUE(chain->Decode(damaged, cpu, &scratch).ok())
          << "the GPU accepted what the CPU rejects";
      ASSERT_TRUE(
          driver->CopyToHost(back.data(), w.DeviceAddress(1), back.size(), w.stream()).ok());
      ASSERT_TRUE(w.Synchronize().ok());
      EXPECT_EQ(back, cpu);
    }
  }
}

// GPU: uploads of many sizes land intact, past the first buffer's capacity.
TEST(GpuDecodeWorkspaceGpuTest, UploadsGrowAndStayValidForTheWave) {
  const CudaDriver* driver = CudaDriver::Get();
  if (driver == nullptr) GTEST_SKIP() << "GPU test skipped: " << CudaDriver::UnavailableReason();
  auto workspace = GpuDecodeWorkspace::Create(driver, Nvcomp::Get());
  ASSERT_TRUE(workspace.ok());
  GpuDecodeWorkspace& w = **workspace;
  ASSERT_TRUE(w.Begin(0, 0, 0).ok());
  std::vector<std::pair<uint64_t, std::vector<std::byte>>> uploads;
  for (uint32_t i = 0; i < 6; ++i) {
    std::vector<std::byte> bytes = testing::RandomBytes((size_t{1} << 18) << i, i);
    auto address = w.Upload(bytes);
    ASSERT_TRUE(address.ok()) << address.status().ToString();
    uploads.emplace_back(*address, std::move(bytes));
  }
  for (const auto& [address, bytes] : uploads) {
    std::vector<std::byte> back(bytes.size());
    ASSERT_TRUE(driver->CopyToHost(back.data(), address, back.size(), w.stream()).ok());
    ASSERT_TRUE(w.Synchronize().ok());
    EXPECT_EQ(back, bytes);
  }
}

}  // namespace
}  // namespace zarrstream
