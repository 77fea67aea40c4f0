// libFuzzer target: sharded chunks (sharding_indexed), read the two ways the array layer reads
// them.
//
// Input layout (fuzz/seed_corpus.py writes seeds in it): byte 0 picks the configuration, the rest
// is one shard object.
//   bit 0     index_location "start" (else "end")
//   bits 1-2  inner codecs: [bytes], [bytes, zstd], [bytes, crc32c], [transpose, bytes, gzip]
//   bit 3     index_codecs [bytes] alone (no crc32c), so mutated indexes get past the checksum
//   bit 4     nested sharding: the inner chunks are themselves shards (of [bytes] chunks)
//   bits 5-6  shard and inner chunk shapes and data type (kLayouts)
// Partial reads: the index is fetched by index_range() and decoded with DecodeIndex, once knowing
// the shard's size (every entry must then lie inside the shard) and once not (each inner chunk's
// range read can then run past the end and must fail cleanly); each inner chunk the index points
// at decodes through inner_chain(). Whole-shard reads: CodecChain::Decode, as nested sharding and
// chains with codecs around sharding_indexed do.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "codec/codec_chain.h"
#include "codec/sharding_codec.h"
#include "fuzz/fuzz_check.h"
#include "store/store.h"

namespace zarrstream::fuzz {
namespace {

struct Layout {
  DataType data_type;
  std::vector<uint64_t> shard_shape;
  std::vector<uint64_t> inner_shape;
};

const Layout kLayouts[] = {
    {DataType::kUInt16, {4, 6}, {2, 3}},
    {DataType::kUInt32, {8}, {2}},
    {DataType::kUInt8, {2, 2, 4}, {1, 2, 2}},
    {DataType::kFloat64, {4, 4}, {4, 4}},
};

nlohmann::json InnerCodecs(uint8_t config, const Layout& layout) {
  const nlohmann::json bytes = {{"name", "bytes"}, {"configuration", {{"endian", "little"}}}};
  if (config & 16) {
    std::vector<uint64_t> nested_shape(layout.inner_shape.size(), 1);
    nested_shape.back() = layout.inner_shape.back();
    return nlohmann::json::array(
        {{{"name", "sharding_indexed"},
          {"configuration", {{"chunk_shape", nested_shape}, {"codecs", {bytes}}}}}});
  }
  switch ((config >> 1) & 3) {
    case 0:
      return nlohmann::json::array({bytes});
    case 1:
      return nlohmann::json::array({bytes, {{"name", "zstd"}, {"configuration", {{"level", 1}}}}});
    case 2:
      return nlohmann::json::array({bytes, {{"name", "crc32c"}}});
    default: {
      std::vector<uint64_t> reversed;
      for (size_t d = layout.inner_shape.size(); d-- > 0;) reversed.push_back(d);
      return nlohmann::json::array(
          {{{"name", "transpose"}, {"configuration", {{"order", reversed}}}},
           bytes,
           {{"name", "gzip"}, {"configuration", {{"level", 1}}}}});
    }
  }
}

nlohmann::json ShardingConfiguration(uint8_t config, const Layout& layout) {
  nlohmann::json configuration = {{"chunk_shape", layout.inner_shape},
                                  {"codecs", InnerCodecs(config, layout)},
                                  {"index_location", (config & 1) ? "start" : "end"}};
  if (config & 8) {
    configuration["index_codecs"] =
        nlohmann::json::array({{{"name", "bytes"}, {"configuration", {{"endian", "little"}}}}});
  }
  return configuration;
}

void CheckDecodeError(const Status& status, const char* where) {
  if (!status.ok() && status.code() != ErrorCode::kCorruptChunk) FuzzFail(where, status);
}

// Decodes inner chunk `i` from `bytes` (its range of the shard) into guarded memory.
void DecodeInnerChunk(const ShardingCodec& sharding, std::span<const std::byte> bytes,
                      CodecScratch* scratch) {
  GuardedBuffer out(sharding.inner_chain().decoded_representation().num_bytes());
  const Status status = sharding.inner_chain().Decode(bytes, out.span(), scratch);
  out.CheckGuard("inner chain wrote past its output");
  CheckDecodeError(status, "inner chunk decode");
}

// The array layer's partial read: the index, then only the inner chunks' byte ranges.
void ReadByRanges(const ShardingCodec& sharding, std::span<const std::byte> shard,
                  bool shard_size_known) {
  uint64_t begin = 0, end = 0;
  if (!ResolveByteRange(sharding.index_range(), shard.size(), &begin, &end).ok()) return;
  CodecScratch scratch;
  auto index = sharding.DecodeIndex(
      shard.subspan(begin, end - begin),
      shard_size_known ? std::optional<uint64_t>(shard.size()) : std::nullopt, &scratch);
  if (!index.ok()) {
    CheckDecodeError(index.status(), "ShardingCodec::DecodeIndex");
    return;
  }
  if (index->num_chunks() != sharding.num_inner_chunks()) FuzzFail("index has the wrong size");
  for (uint64_t i = 0; i < index->num_chunks(); ++i) {
    if (index->is_empty(i)) continue;
    if (shard_size_known &&
        (index->offset(i) > shard.size() || index->nbytes(i) > shard.size() - index->offset(i))) {
      FuzzFail("DecodeIndex accepted an entry outside the shard");
    }
    uint64_t chunk_begin = 0, chunk_end = 0;
    const Status range = ResolveByteRange(ByteRange::Bounded(index->offset(i), index->nbytes(i)),
                                          shard.size(), &chunk_begin, &chunk_end);
    if (!range.ok()) continue;  // the store reports a short object; nothing is decoded
    DecodeInnerChunk(sharding, shard.subspan(chunk_begin, chunk_end - chunk_begin), &scratch);
  }
}

}  // namespace
}  // namespace zarrstream::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zarrstream;
  if (size < 1) return 0;
  const uint8_t config = data[0];
  const fuzz::Layout& layout = fuzz::kLayouts[(config >> 5) & 3];
  ChunkRepresentation shard_representation;
  shard_representation.data_type = layout.data_type;
  shard_representation.shape = layout.shard_shape;
  shard_representation.fill_value.assign(DataTypeSize(layout.data_type), std::byte{0x7F});
  const std::vector<CodecSpec> specs = {
      {"sharding_indexed", fuzz::ShardingConfiguration(config, layout)}};
  auto chain = CodecChain::Make(specs, shard_representation);
  if (!chain.ok()) fuzz::FuzzFail("a valid sharding configuration was rejected", chain.status());
  const ShardingCodec* sharding = (*chain)->sharding();
  if (sharding == nullptr) fuzz::FuzzFail("[sharding_indexed] chain has no sharding codec");

  const auto shard = std::as_bytes(std::span(data + 1, size - 1));
  fuzz::ReadByRanges(*sharding, shard, /*shard_size_known=*/true);
  fuzz::ReadByRanges(*sharding, shard, /*shard_size_known=*/false);

  CodecScratch scratch;
  fuzz::GuardedBuffer whole(shard_representation.num_bytes());
  const Status status = (*chain)->Decode(shard, whole.span(), &scratch);
  whole.CheckGuard("whole-shard decode wrote past its output");
  fuzz::CheckDecodeError(status, "whole-shard decode");
  return 0;
}
