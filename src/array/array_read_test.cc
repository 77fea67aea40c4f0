// Region reads of arrays held in a memory store, written with our own encoders: edge chunks,
// missing chunks, strided outputs, sharding with partial reads. Peer-written fixtures (zarr-python,
// tensorstore) are tested from Python in tests/.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

#include "array/array_state.h"
#include "codec/codec_chain.h"
#include "codec/crc32c_codec.h"
#include "metadata/v3_metadata.h"
#include "store/memory_store.h"
#include "store/store_registry.h"
#include "zarrstream/array.h"

namespace zarrstream {
namespace {

// A small array with known values (value = linear index), written chunk by chunk to a memory store.
class TestArray {
 public:
  TestArray(const std::string& name, std::vector<uint64_t> shape, std::vector<uint64_t> chunks,
            const std::string& codecs_json, const std::string& extra_json = "")
      : name_(name), shape_(std::move(shape)), chunks_(std::move(chunks)) {
    store_ = std::static_pointer_cast<MemoryStore>(*OpenStore("memory://" + name));
    nlohmann::json meta = {
        {"zarr_format", 3},
        {"node_type", "array"},
        {"shape", shape_},
        {"data_type", "int32"},
        {"chunk_grid", {{"name", "regular"}, {"configuration", {{"chunk_shape", chunks_}}}}},
        {"chunk_key_encoding", {{"name", "default"}}},
        {"fill_value", -1},
        {"codecs", nlohmann::json::parse(codecs_json)},
    };
    if (!extra_json.empty()) meta.update(nlohmann::json::parse(extra_json));
    metadata_json_ = meta.dump();
    EXPECT_TRUE(store_->Put("zarr.json", metadata_json_).ok());
    values_.resize(Product(shape_));
    std::iota(values_.begin(), values_.end(), 0);
  }

  static uint64_t Product(const std::vector<uint64_t>& v) {
    uint64_t p = 1;
    for (auto x : v) p *= x;
    return p;
  }

  // Writes every chunk except those for which skip(chunk coords) is true.
  void WriteChunks(const std::function<bool(const std::vector<uint64_t>&)>& skip = nullptr) {
    auto node = ParseV3Metadata(metadata_json_);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    const auto& meta = std::get<ArrayMetadata>(*node);
    ChunkRepresentation repr{meta.data_type, meta.chunk_shape, meta.fill_value};
    auto chain = CodecChain::Make(meta.codecs, repr);
    ASSERT_TRUE(chain.ok()) << chain.status().ToString();
    auto grid = meta.grid_shape();
    const size_t rank = shape_.size();
    std::vector<uint64_t> coords(rank, 0);
    for (uint64_t linear = 0; linear < Product(grid); ++linear) {
      uint64_t rest = linear;
      for (size_t d = rank; d-- > 0;) {
        coords[d] = rest % grid[d];
        rest /= grid[d];
      }
      if (skip && skip(coords)) continue;
      // Chunk contents: array values inside, the fill value outside the array (edge chunks).
      std::vector<int32_t> chunk(Product(chunks_), -1);
      for (uint64_t i = 0; i < chunk.size(); ++i) {
        uint64_t r = i, flat = 0;
        bool inside = true;
        std::vector<uint64_t> local(rank);
        for (size_t d = rank; d-- > 0;) {
          local[d] = r % chunks_[d];
          r /= chunks_[d];
        }
        for (size_t d = 0; d < rank; ++d) {
          uint64_t g = coords[d] * chunks_[d] + local[d];
          inside &= g < shape_[d];
          flat = flat * shape_[d] + g;
        }
        if (inside) chunk[i] = values_[flat];
      }
      ByteBuffer encoded;
      ASSERT_TRUE((*chain)->Encode(std::as_bytes(std::span<const int32_t>(chunk)), &encoded).ok());
      ASSERT_TRUE(store_->Put(meta.chunk_key_encoding.EncodeKey(coords), encoded.span()).ok());
    }
  }

  // The expected values of region [start, start + shape), with `missing` chunks read as -1.
  std::vector<int32_t> Expected(
      const std::vector<uint64_t>& start, const std::vector<uint64_t>& shape,
      const std::function<bool(const std::vector<uint64_t>&)>& missing = nullptr) const {
    std::vector<int32_t> out(Product(shape));
    const size_t rank = shape.size();
    for (uint64_t i = 0; i < out.size(); ++i) {
      uint64_t r = i, flat = 0;
      std::vector<uint64_t> g(rank), c(rank);
      for (size_t d = rank; d-- > 0;) {
        g[d] = start[d] + r % shape[d];
        r /= shape[d];
      }
      for (size_t d = 0; d < rank; ++d) {
        flat = flat * shape_[d] + g[d];
        c[d] = g[d] / chunks_[d];
      }
      out[i] = (missing && missing(c)) ? -1 : values_[flat];
    }
    return out;
  }

  std::string url() const { return "memory://" + name_; }
  MemoryStore& store() { return *store_; }

 private:
  std::string name_;
  std::vector<uint64_t> shape_, chunks_;
  std::string metadata_json_;
  std::shared_ptr<MemoryStore> store_;
  std::vector<int32_t> values_;
};

const char* kZstd = R"([{"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "zstd", "configuration": {"level": 1, "checksum": false}}])";

std::vector<int32_t> ReadRegion(const Array& a, std::vector<uint64_t> start,
                                std::vector<uint64_t> shape) {
  std::vector<int32_t> out(TestArray::Product(shape), 12345);
  Status s = a.Read(start, shape, out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(ArrayReadTest, WholeArrayAndRegionsWithEdgeChunks) {
  TestArray t("read-edges", {10, 7, 9}, {4, 3, 5}, kZstd);
  t.WriteChunks();
  auto a = Array::Open(t.url());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->chunks(), (std::vector<uint64_t>{4, 3, 5}));
  EXPECT_FALSE(a->shard_shape().has_value());
  for (auto [start, shape] : std::vector<std::pair<std::vector<uint64_t>, std::vector<uint64_t>>>{
           {{0, 0, 0}, {10, 7, 9}},
           {{3, 2, 4}, {5, 4, 5}},
           {{9, 6, 8}, {1, 1, 1}},
           {{0, 0, 0}, {4, 3, 5}},
           {{4, 0, 0}, {1, 7, 9}},
           {{2, 1, 0}, {8, 6, 9}}}) {
    EXPECT_EQ(ReadRegion(*a, start, shape), t.Expected(start, shape));
  }
}

TEST(ArrayReadTest, MissingChunksReadAsFillValueOrFail) {
  TestArray t("read-missing", {8, 8}, {4, 4}, kZstd);
  auto missing = [](const std::vector<uint64_t>& c) { return c[0] == 1 && c[1] == 0; };
  t.WriteChunks(missing);
  auto a = Array::Open(t.url());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(ReadRegion(*a, {0, 0}, {8, 8}), t.Expected({0, 0}, {8, 8}, missing));

  OpenOptions strict;
  strict.missing_chunks_are_errors = true;
  auto b = Array::Open(t.url(), strict);
  ASSERT_TRUE(b.ok());
  std::vector<int32_t> out(64);
  std::vector<uint64_t> start = {0, 0}, shape = {8, 8};
  Status s = b->Read(start, shape, out.data());
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find("c/1/0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("memory://read-missing"), std::string::npos) << s.message();
}

TEST(ArrayReadTest, CorruptChunkErrorNamesTheChunk) {
  TestArray t("read-corrupt", {8}, {4}, kZstd);
  t.WriteChunks();
  ASSERT_TRUE(t.store().Put("c/1", std::string_view("this is not a zstd frame")).ok());
  auto a = Array::Open(t.url());
  ASSERT_TRUE(a.ok());
  std::vector<int32_t> out(8);
  std::vector<uint64_t> start = {0}, shape = {8};
  Status s = a->Read(start, shape, out.data());
  EXPECT_EQ(s.code(), ErrorCode::kCorruptChunk);
  EXPECT_NE(s.message().find("reading chunk 'c/1'"), std::string::npos) << s.message();
}

TEST(ArrayReadTest, StridedOutput) {
  TestArray t("read-strided", {6, 5}, {4, 2}, kZstd);
  t.WriteChunks();
  auto a = Array::Open(t.url());
  ASSERT_TRUE(a.ok());
  // Read into a transposed (Fortran-order) buffer.
  std::vector<int32_t> out(30);
  std::vector<uint64_t> start = {0, 0}, shape = {6, 5};
  std::vector<int64_t> strides = {4, int64_t{4} * 6};
  ASSERT_TRUE(a->Read(start, shape, out.data(), strides).ok());
  auto expected = t.Expected(start, shape);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(out[j * 6 + i], expected[i * 5 + j]);
}

TEST(ArrayReadTest, RegionOutsideTheArrayIsAnError) {
  TestArray t("read-bounds", {4, 4}, {2, 2}, kZstd);
  t.WriteChunks();
  auto a = Array::Open(t.url());
  ASSERT_TRUE(a.ok());
  std::vector<int32_t> out(16);
  std::vector<uint64_t> start = {3, 0}, shape = {2, 4};
  EXPECT_EQ(a->Read(start, shape, out.data()).code(), ErrorCode::kInvalidArgument);
  // Empty along one dimension does not excuse the other's overrun (found by array_region_fuzzer).
  start = {1, 3};
  shape = {0, 2};
  EXPECT_EQ(a->Read(start, shape, out.data()).code(), ErrorCode::kInvalidArgument);
  start = {1, 0};
  shape = {0, 4};
  EXPECT_TRUE(a->Read(start, shape, out.data()).ok());
}

std::string Sharded(const std::string& location, const std::string& inner = kZstd) {
  return R"([{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 3],
             "codecs": )" +
         inner + R"(, "index_codecs": [{"name": "bytes", "configuration":
             {"endian": "little"}}, {"name": "crc32c"}], "index_location": ")" +
         location + R"("}}])";
}

class ShardedReadTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShardedReadTest, PartialReadsOfShardsWithMissingInnerChunks) {
  TestArray t("read-sharded-" + GetParam(), {9, 13}, {4, 6}, Sharded(GetParam()));
  t.WriteChunks([](const std::vector<uint64_t>& c) { return c[0] == 2 && c[1] == 0; });
  auto a = Array::Open(t.url());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->chunks(), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(a->shard_shape(), (std::vector<uint64_t>{4, 6}));
  // TestArray's chunk grid is the shard grid: shard (2, 0) was never written.
  auto missing = [&](const std::vector<uint64_t>& shard) { return shard[0] == 2 && shard[1] == 0; };
  for (auto [start, shape] : std::vector<std::pair<std::vector<uint64_t>, std::vector<uint64_t>>>{
           {{0, 0}, {9, 13}}, {{1, 1}, {2, 2}}, {{3, 5}, {4, 7}}, {{8, 0}, {1, 13}}}) {
    EXPECT_EQ(ReadRegion(*a, start, shape), t.Expected(start, shape, missing));
  }
}

TEST_P(ShardedReadTest, ShardIndexPointingOutsideTheShardIsCorrupt) {
  TestArray t("read-sharded-bad-" + GetParam(), {4, 6}, {4, 6},
              Sharded(GetParam(), R"([{"name": "bytes", "configuration": {"endian": "little"}}])"));
  t.WriteChunks();
  auto shard = t.store().ReadAll("c/0/0");
  ASSERT_TRUE(shard.ok());
  // Point the first index entry far past the end of the shard, with a valid checksum, so the
  // bounds check (not the crc32c) must catch it.
  const size_t n = 4, index_bytes = n * 16 + 4;
  ByteBuffer bytes = *shard;
  size_t index_at = GetParam() == "end" ? bytes.size() - index_bytes : 0;
  uint64_t bad = 1u << 30;
  std::memcpy(bytes.data() + index_at, &bad, 8);
  uint32_t crc = Crc32c(bytes.span().subspan(index_at, n * 16));
  std::memcpy(bytes.data() + index_at + n * 16, &crc, 4);
  ASSERT_TRUE(t.store().Put("c/0/0", bytes.span()).ok());
  auto a = Array::Open(t.url());
  ASSERT_TRUE(a.ok());
  std::vector<int32_t> out(24);
  std::vector<uint64_t> start = {0, 0}, shape = {4, 6};
  Status s = a->Read(start, shape, out.data());
  EXPECT_EQ(s.code(), ErrorCode::kCorruptChunk) << s.ToString();
  EXPECT_NE(s.message().find("c/0/0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("outside"), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(IndexLocation, ShardedReadTest, ::testing::Values("start", "end"));

}  // namespace
}  // namespace zarrstream
