// Icechunk's file header, object ids and flatbuffers, on files built here; tests/test_icechunk.py
// reads repositories that the icechunk package writes.
#include "store/icechunk_format.h"

#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>
#include <zstd.h>

#include <cstring>

#include "util/status_test_util.h"

namespace zarrstream::icechunk {
namespace {

constexpr flatbuffers::voffset_t Slot(int id) {
  return static_cast<flatbuffers::voffset_t>(4 + 2 * id);
}

std::vector<std::byte> WithHeader(std::span<const uint8_t> body, uint8_t spec_version,
                                  FileType type, bool compress) {
  std::string header =
      "ICE\xF0\x9F\xA7\x8A"
      "CHUNK";
  std::string name = "test-writer";
  name.resize(24, ' ');
  header += name;
  header.push_back(static_cast<char>(spec_version));
  header.push_back(static_cast<char>(type));
  header.push_back(compress ? 1 : 0);
  std::vector<std::byte> out(header.size());
  std::memcpy(out.data(), header.data(), header.size());
  if (!compress) {
    out.insert(out.end(), reinterpret_cast<const std::byte*>(body.data()),
               reinterpret_cast<const std::byte*>(body.data()) + body.size());
    return out;
  }
  std::vector<std::byte> compressed(ZSTD_compressBound(body.size()));
  const size_t n = ZSTD_compress(compressed.data(), compressed.size(), body.data(), body.size(), 3);
  out.insert(out.end(), compressed.begin(), compressed.begin() + static_cast<ptrdiff_t>(n));
  return out;
}

TEST(IcechunkFormatTest, ObjectIdsAreCrockfordBase32) {
  const std::vector<uint8_t> first = {0x0b, 0x1c, 0xc8, 0xd6, 0x78, 0x75,
                                      0x80, 0xf0, 0xe3, 0x3a, 0x65, 0x34};
  EXPECT_EQ(EncodeObjectId(first), "1CECHNKREP0F1RSTCMT0");
  EXPECT_EQ(DecodeObjectId("1CECHNKREP0F1RSTCMT0", 12), first);
  EXPECT_EQ(DecodeObjectId("1cechnkrepof1rstcmt0", 12), first);        // case and the alias O → 0
  EXPECT_EQ(DecodeObjectId("1CECHNKREP0F1RSTCMT", 12), std::nullopt);  // too short
  EXPECT_EQ(DecodeObjectId("1CECHNKREP0F1RSTCMTU", 12), std::nullopt);  // U is not a digit
  EXPECT_EQ(DecodeObjectId("1CECHNKREP0F1RSTCMT1", 12), std::nullopt);  // padding bits set
  const std::vector<uint8_t> node = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(EncodeObjectId(node).size(), 13u);
  EXPECT_EQ(DecodeObjectId(EncodeObjectId(node), 8), node);
}

TEST(IcechunkFormatTest, HeaderIsChecked) {
  const std::vector<uint8_t> body = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (bool compress : {false, true}) {
    auto file = WithHeader(body, 1, FileType::kSnapshot, compress);
    Result<DecodedFile> decoded_or = DecodeFile(file, FileType::kSnapshot, "s");
    ASSERT_TRUE(decoded_or.ok()) << decoded_or.status().ToString();
    const DecodedFile& decoded = *decoded_or;
    EXPECT_EQ(decoded.flatbuffer, body);
    EXPECT_EQ(decoded.spec_version, 1);
    EXPECT_EQ(decoded.implementation, "test-writer");
  }
  auto file = WithHeader(body, 3, FileType::kSnapshot, true);
  Status s = DecodeFile(file, FileType::kSnapshot, "snapshot X").status();
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("spec version 3"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("snapshot X"), std::string::npos) << s.ToString();

  file = WithHeader(body, 1, FileType::kManifest, true);
  s = DecodeFile(file, FileType::kSnapshot, "s").status();
  EXPECT_EQ(s.code(), ErrorCode::kCorruptChunk);
  EXPECT_NE(s.message().find("file type 2, expected 1"), std::string::npos) << s.ToString();

  file = WithHeader(body, 1, FileType::kSnapshot, true);
  file[38] = std::byte{7};
  s = DecodeFile(file, FileType::kSnapshot, "s").status();
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("compression algorithm 7"), std::string::npos) << s.ToString();

  file = WithHeader(body, 1, FileType::kSnapshot, true);
  file[0] = std::byte{'X'};
  EXPECT_EQ(DecodeFile(file, FileType::kSnapshot, "s").status().code(), ErrorCode::kCorruptChunk);

  file = WithHeader(body, 1, FileType::kSnapshot, true);
  file.resize(file.size() - 3);  // truncated zstd stream
  EXPECT_EQ(DecodeFile(file, FileType::kSnapshot, "s").status().code(), ErrorCode::kCorruptChunk);
  file.resize(20);  // shorter than a header
  EXPECT_EQ(DecodeFile(file, FileType::kSnapshot, "s").status().code(), ErrorCode::kCorruptChunk);
}

// A manifest of node {7,...} with chunk refs [0,0] inline, [0,1] native, [1,0] virtual.
std::vector<uint8_t> BuildManifest(const ObjectId8& node) {
  flatbuffers::FlatBufferBuilder b;
  auto chunk_ref = [&](std::vector<uint32_t> index, int kind) {
    auto index_vector = b.CreateVector(index);
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data;
    flatbuffers::Offset<flatbuffers::String> location;
    if (kind == 0) data = b.CreateVector(std::vector<uint8_t>{42, 43});
    if (kind == 2) location = b.CreateString("s3://bucket/file.nc");
    const auto start = b.StartTable();
    b.AddOffset(Slot(0), index_vector);
    if (kind == 0) b.AddOffset(Slot(1), data);
    if (kind != 0) {
      b.AddElement<uint64_t>(Slot(2), 100, 0);
      b.AddElement<uint64_t>(Slot(3), 50, 0);
    }
    if (kind == 1) {
      ObjectId12 id{};
      id.fill(9);
      b.AddStruct(Slot(4), reinterpret_cast<const std::array<uint8_t, 12>*>(&id));
    }
    if (kind == 2) b.AddOffset(Slot(5), location);
    return flatbuffers::Offset<flatbuffers::Table>(b.EndTable(start));
  };
  std::vector<flatbuffers::Offset<flatbuffers::Table>> refs = {
      chunk_ref({0, 0}, 0), chunk_ref({0, 1}, 1), chunk_ref({1, 0}, 2)};
  auto refs_vector = b.CreateVector(refs);
  auto array_start = b.StartTable();
  b.AddStruct(Slot(0), &node);
  b.AddOffset(Slot(1), refs_vector);
  auto array = flatbuffers::Offset<flatbuffers::Table>(b.EndTable(array_start));
  auto arrays = b.CreateVector(std::vector{array});
  auto root_start = b.StartTable();
  ObjectId12 id{};
  id.fill(1);
  b.AddStruct(Slot(0), &id);
  b.AddOffset(Slot(1), arrays);
  b.Finish(flatbuffers::Offset<flatbuffers::Table>(b.EndTable(root_start)));
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

TEST(IcechunkFormatTest, ManifestFindsInlineNativeAndVirtualReferences) {
  ObjectId8 node{};
  node.fill(7);
  Result<std::shared_ptr<const Manifest>> parsed = Manifest::Parse(BuildManifest(node), 1, "m");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Manifest* manifest = parsed->get();
  auto find = [&](const ObjectId8& n, const std::vector<uint32_t>& index) {
    Result<std::optional<ChunkRef>> found = manifest->Find(n, index);
    EXPECT_TRUE(found.ok()) << found.status().ToString();
    return found.ok() ? *found : std::nullopt;
  };
  EXPECT_EQ(manifest->id()[0], 1);
  const std::vector<uint32_t> i00 = {0, 0}, i01 = {0, 1}, i10 = {1, 0}, i11 = {1, 1};
  std::optional<ChunkRef> ref = find(node, i00);
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->kind, ChunkRef::Kind::kInline);
  EXPECT_EQ(std::vector<uint8_t>(ref->inline_data.begin(), ref->inline_data.end()),
            (std::vector<uint8_t>{42, 43}));
  ref = find(node, i01);
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->kind, ChunkRef::Kind::kNative);
  EXPECT_EQ(ref->chunk_id[11], 9);
  EXPECT_EQ(ref->offset, 100u);
  EXPECT_EQ(ref->length, 50u);
  ref = find(node, i10);
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->kind, ChunkRef::Kind::kVirtual);
  EXPECT_EQ(ref->location, "s3://bucket/file.nc");
  ref = find(node, i11);
  EXPECT_FALSE(ref.has_value());
  ObjectId8 other{};
  ref = find(other, i00);
  EXPECT_FALSE(ref.has_value());
  int count = 0;
  EXPECT_TRUE(
      manifest->ForEach(node, [&](std::span<const uint32_t>, const ChunkRef&) { ++count; }).ok());
  EXPECT_EQ(count, 3);
}

TEST(IcechunkFormatTest, CorruptFlatbuffersAreRefused) {
  ObjectId8 node{};
  const std::vector<uint8_t> good = BuildManifest(node);
  // Every single-byte change of the root offset or a vtable either still verifies or is refused;
  // none may be read past the buffer (ASan runs this test too).
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0xff;
    Result<std::shared_ptr<const Manifest>> parsed = Manifest::Parse(bad, 1, "m");
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), ErrorCode::kCorruptChunk);
      continue;
    }
    const std::vector<uint32_t> index = {0, 0};
    (void)(*parsed)->Find(node, index);
  }
  std::vector<uint8_t> truncated(good.begin(), good.begin() + 10);
  EXPECT_EQ(Manifest::Parse(truncated, 1, "m").status().code(), ErrorCode::kCorruptChunk);
  EXPECT_EQ(ParseSnapshot(good, 1, "s").status().code(), ErrorCode::kCorruptChunk);
}

}  // namespace
}  // namespace zarrstream::icechunk
