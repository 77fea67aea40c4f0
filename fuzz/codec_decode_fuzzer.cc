// libFuzzer target: decoding one chunk through a codec chain chosen by the input.
//
// Input layout (fuzz/seed_corpus.py writes seeds in it):
//   byte 0  chain: which codec list of kChains (mod its size)
//   byte 1  data type: which entry of kDataTypes
//   byte 2  rank (mod 4); bytes 3..5 the chunk's dimensions (each mod 17, so 0 is possible)
//   byte 6  flags: bit 0 big-endian "bytes"; bit 1 a hostile transpose order (repeated or out of
//           range axes) instead of a permutation
//   byte 7  which permutation of the axes transpose uses
//   rest    the encoded chunk
// The chunk decodes into a buffer of the representation's exact size (at most 16^3 * 16 bytes)
// followed by guard bytes. Failures must be kCorruptChunk errors (codec.h: decoders never trust
// stored bytes). The outermost bytes->bytes codec also decodes the payload with only a bound on its
// size, the path a codec behind a variable-size one takes: it must not allocate past the bound
// (the fuzzer's RSS limit catches a decoder that trusts a size from a header instead).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codec/codec_chain.h"
#include "codec/codec_registry.h"
#include "codec/decoded_size.h"
#include "fuzz/fuzz_check.h"
#include "metadata/v2_metadata.h"

namespace zarrstream::fuzz {
namespace {

constexpr size_t kHeaderSize = 8;
constexpr uint64_t kMaxDimension = 16;

// numpy names, so that numcodecs filters (delta, fixedscaleoffset) can name the same type.
constexpr const char* kDataTypes[] = {"|u1", "<i2", "<u2", "<i4", "<f4", "<f8",
                                      "<i8", "<c8", "|b1", "<f2", "<u8", "|i1"};

struct ChainInputs {
  const char* numpy_type;
  bool big_endian;
  size_t type_size;
  std::vector<uint64_t> transpose_order;
};

CodecSpec Bytes(const ChainInputs& in) {
  return {"bytes", {{"endian", in.big_endian ? "big" : "little"}}};
}

using ChainBuilder = std::vector<CodecSpec> (*)(const ChainInputs&);

// Every bytes->bytes codec alone behind "bytes", then the combinations zarr-python and numcodecs
// write: checksums outside compressors, numcodecs filters and transpose in front.
constexpr ChainBuilder kChains[] = {
    [](const ChainInputs& in) -> std::vector<CodecSpec> { return {Bytes(in)}; },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in), {"zstd", {{"level", 3}, {"checksum", false}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in), {"gzip", {{"level", 5}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in), {"numcodecs.zlib", {{"level", 5}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in), {"numcodecs.lz4", {{"acceleration", 1}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in), {"numcodecs.bz2", {{"level", 5}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in),
              {"blosc",
               {{"cname", "lz4"},
                {"clevel", 5},
                {"shuffle", "shuffle"},
                {"typesize", in.type_size},
                {"blocksize", 0}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in),
              {"numcodecs.blosc",
               {{"cname", "zstd"}, {"clevel", 5}, {"shuffle", -1}, {"blocksize", 0}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in), {"crc32c", {}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in),
              {"numcodecs.shuffle", {{"elementsize", in.type_size}}},
              {"numcodecs.zstd", {{"level", 1}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in), {"zstd", {{"level", 3}, {"checksum", true}}}, {"crc32c", {}}};
    },
    // zstd's decoded size is unknown here (gzip's encoded size depends on the bytes).
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {Bytes(in), {"numcodecs.gzip", {{"level", 1}}}, {"zstd", {{"level", 1}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {{"numcodecs.delta", {{"dtype", in.numpy_type}}},
              Bytes(in),
              {"zstd", {{"level", 1}, {"checksum", false}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {{"numcodecs.fixedscaleoffset",
               {{"scale", 100}, {"offset", 1.5}, {"dtype", in.numpy_type}, {"astype", "<i2"}}},
              Bytes(in),
              {"numcodecs.zlib", {{"level", 1}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {{"transpose", {{"order", in.transpose_order}}},
              Bytes(in),
              {"numcodecs.lz4", {{"acceleration", 1}}}};
    },
    [](const ChainInputs& in) -> std::vector<CodecSpec> {
      return {{"transpose", {{"order", in.transpose_order}}},
              Bytes(in),
              {"blosc",
               {{"cname", "zstd"},
                {"clevel", 1},
                {"shuffle", "bitshuffle"},
                {"typesize", in.type_size},
                {"blocksize", 0}}}};
    },
};

std::vector<uint64_t> TransposeOrder(size_t rank, uint8_t flags, uint8_t selector) {
  std::vector<uint64_t> order(rank);
  if (flags & 2) {
    // Hostile: axes drawn from [0, rank + 1], so repeats and out-of-range axes both occur.
    for (size_t d = 0; d < rank; ++d) order[d] = (selector >> (2 * d)) % (rank + 2);
    return order;
  }
  std::iota(order.begin(), order.end(), uint64_t{0});
  for (int i = 0; i < selector % 6; ++i) std::next_permutation(order.begin(), order.end());
  return order;
}

void CheckDecodeError(const Status& status, const char* where) {
  if (!status.ok() && status.code() != ErrorCode::kCorruptChunk) FuzzFail(where, status);
}

void DecodeOne(std::span<const uint8_t> input) {
  const uint8_t* header = input.data();
  auto type = ParseV2DataType(kDataTypes[header[1] % std::size(kDataTypes)]);
  if (!type.ok()) FuzzFail("fuzzer data type table", type.status());

  ChunkRepresentation chunk;
  chunk.data_type = type->first;
  chunk.shape.resize(header[2] % 4);
  for (size_t d = 0; d < chunk.shape.size(); ++d)
    chunk.shape[d] = header[3 + d] % (kMaxDimension + 1);
  chunk.fill_value.assign(DataTypeSize(chunk.data_type), std::byte{0});

  ChainInputs inputs{kDataTypes[header[1] % std::size(kDataTypes)], (header[6] & 1) != 0,
                     DataTypeSize(chunk.data_type),
                     TransposeOrder(chunk.shape.size(), header[6], header[7])};
  const std::vector<CodecSpec> specs = kChains[header[0] % std::size(kChains)](inputs);
  auto chain = CodecChain::Make(specs, chunk);
  if (!chain.ok()) {
    CheckNotInternal(chain.status(), "CodecChain::Make");
    return;
  }

  const auto payload = std::as_bytes(input.subspan(kHeaderSize));
  const uint64_t num_bytes = (*chain)->decoded_representation().num_bytes();
  CodecScratch scratch;
  GuardedBuffer first(num_bytes);
  const Status status = (*chain)->Decode(payload, first.span(), &scratch);
  first.CheckGuard("CodecChain::Decode wrote past its output");
  CheckDecodeError(status, "CodecChain::Decode");
  if (status.ok()) {
    // Scratch buffers are reused from chunk to chunk; a second decode must not see the first.
    GuardedBuffer second(num_bytes);
    const Status again = (*chain)->Decode(payload, second.span(), &scratch);
    second.CheckGuard("CodecChain::Decode wrote past its output (second decode)");
    if (!again.ok() || !std::ranges::equal(first.span(), second.span())) {
      FuzzFail("decoding the same chunk twice gave different results", again);
    }
  }

  const CodecSpec& outermost = specs.back();
  const CodecRegistration* registration = FindCodec(outermost.name);
  if (registration == nullptr || registration->kind != CodecKind::kBytesToBytes) return;
  auto codec = registration->bytes_to_bytes(outermost.configuration, chunk);
  if (!codec.ok()) {
    CheckNotInternal(codec.status(), "bytes->bytes factory");
    return;
  }
  // A bound like CodecChain's for a codec behind a compressor: generous enough for every chain's
  // largest representation (fixedscaleoffset may widen the values; 16^3 elements of 16 bytes).
  const uint64_t limit = MaxCompressedSize(MaxCompressedSize(uint64_t{16} << 12));
  ByteBuffer bounded;
  const Status bounded_status = (*codec)->Decode(payload, DecodedSize::AtMost(limit), &bounded);
  CheckDecodeError(bounded_status, "BytesToBytesCodec::Decode with a bounded size");
  if (bounded.capacity() > limit) FuzzFail("BytesToBytesCodec::Decode allocated past its bound");
}

}  // namespace
}  // namespace zarrstream::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < zarrstream::fuzz::kHeaderSize) return 0;
  zarrstream::fuzz::DecodeOne(std::span(data, size));
  return 0;
}
