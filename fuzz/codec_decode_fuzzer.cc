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
//
// Chains the GPU path decodes (gpu/gpu_decoder.h: PlanGpuDecode) are also read the GPU path's way,
// worked out on the CPU (CheckGpuReading): the streams GpuChunkCodec::Parse finds must lie inside
// the stored bytes and tile the chunk, and where the GPU path would produce a chunk it must be
// the CPU decoder's chunk, which the CPU decoder accepted.
#include <libdeflate.h>
#include <lz4.h>
#include <zstd.h>

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
#include "gpu/gpu_decoder.h"
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

// `payload` decompressed by the CPU library of `compression` into exactly `out`, as nvCOMP decodes
// a valid stream; false where it does not fill `out` exactly (nvCOMP reports such a stream, or its
// size differs, and the loader then decodes the chunk on the CPU). gzip's CRC-32 is verified here,
// and zlib's Adler-32 by the caller, as the GPU path verifies them after decoding (a mismatch
// rejects the chunk).
bool DecompressExactly(GpuCompression compression, std::span<const std::byte> payload,
                       std::span<std::byte> out) {
  switch (compression) {
    case GpuCompression::kZstd: {
      const size_t n = ZSTD_decompress(out.data(), out.size(), payload.data(), payload.size());
      return !ZSTD_isError(n) && n == out.size();
    }
    case GpuCompression::kLz4: {
      if (payload.size() > INT32_MAX || out.size() > INT32_MAX) return false;
      const int n = LZ4_decompress_safe(
          reinterpret_cast<const char*>(payload.data()), reinterpret_cast<char*>(out.data()),
          static_cast<int>(payload.size()), static_cast<int>(out.size()));
      return n >= 0 && static_cast<size_t>(n) == out.size();
    }
    case GpuCompression::kGzip:
    case GpuCompression::kDeflate: {
      // The whole payload: bytes after the stream are where zlib's Adler-32 should have been.
      libdeflate_decompressor* d = libdeflate_alloc_decompressor();
      size_t in = 0, n = 0;
      const libdeflate_result r =
          compression == GpuCompression::kGzip
              ? libdeflate_gzip_decompress_ex(d, payload.data(), payload.size(), out.data(),
                                              out.size(), &in, &n)
              : libdeflate_deflate_decompress_ex(d, payload.data(), payload.size(), out.data(),
                                                 out.size(), &in, &n);
      libdeflate_free_decompressor(d);
      return r == LIBDEFLATE_SUCCESS && n == out.size() && in == payload.size();
    }
  }
  return false;
}

void CheckGpuReading(const CodecChain& chain, std::span<const std::byte> stored,
                     const Status& cpu_status, std::span<const std::byte> cpu_chunk) {
  // A sharded chain's plan is for its inner chunks, which the loader reads one by one.
  if (chain.sharding() != nullptr) return;
  const std::optional<GpuChunkCodec> plan = PlanGpuDecode(chain).codec;
  if (!plan) return;
  const ChunkRepresentation& chunk = chain.decoded_representation();
  if (plan->decoded_bytes != cpu_chunk.size()) FuzzFail("PlanGpuDecode: not the chain's size");
  Result<GpuChunkParse> parse = plan->Parse(stored);
  if (!parse.ok()) {
    // Rejected before the GPU sees it: the loader decodes the chunk on the CPU.
    if (parse.status().code() != ErrorCode::kCorruptChunk &&
        parse.status().code() != ErrorCode::kUnsupported) {
      FuzzFail("GpuChunkCodec::Parse", parse.status());
    }
    return;
  }
  // The streams lie inside the stored bytes and tile the chunk: nothing decoded twice, nothing
  // left as whatever the GPU's memory held.
  std::vector<std::pair<uint64_t, uint64_t>> tiles;
  for (const GpuStream& s : parse->streams) {
    if (s.payload.data() < stored.data() ||
        s.payload.data() + s.payload.size() > stored.data() + stored.size()) {
      FuzzFail("GpuChunkCodec::Parse: a stream outside the stored bytes");
    }
    tiles.emplace_back(s.output_offset, s.output_bytes);
  }
  std::ranges::sort(tiles);
  uint64_t covered = 0;
  for (const auto& [offset, bytes] : tiles) {
    if (offset != covered) FuzzFail("GpuChunkCodec::Parse: streams overlap or leave a gap");
    covered += bytes;
  }
  if (covered != plan->decoded_bytes)
    FuzzFail("GpuChunkCodec::Parse: streams do not fill the chunk");

  std::vector<std::byte> landing(plan->decoded_bytes);
  for (const GpuStream& s : parse->streams) {
    const std::span<std::byte> out = std::span(landing).subspan(s.output_offset, s.output_bytes);
    if (!s.compression) {
      if (s.payload.size() != s.output_bytes)
        FuzzFail("GpuChunkCodec::Parse: a stored stream's size");
      std::ranges::copy(s.payload, out.begin());
    } else if (!DecompressExactly(*s.compression, s.payload, out)) {
      return;  // rejected on the GPU: the loader decodes the chunk on the CPU
    }
    if (plan->framing == GpuChunkCodec::Framing::kZlib) {
      // The Adler-32 (big-endian) follows the deflate stream that Payload kept.
      const std::byte* trailer = s.payload.data() + s.payload.size();
      uint32_t stored_adler = 0;
      for (int k = 0; k < 4; ++k) {
        stored_adler = stored_adler << 8 | static_cast<uint8_t>(trailer[k]);
      }
      if (libdeflate_adler32(1, out.data(), out.size()) != stored_adler) return;  // rejected
    }
  }
  std::vector<std::byte> decoded = landing;
  if (const uint64_t typesize = parse->unshuffle_typesize; typesize != 0) {  // as zs_unshuffle
    for (uint64_t at = 0; at < landing.size(); at += parse->block_bytes) {
      const uint64_t bytes = std::min<uint64_t>(parse->block_bytes, landing.size() - at);
      const uint64_t elements = bytes / typesize;
      for (uint64_t i = 0; i < elements * typesize; ++i) {
        decoded[at + i] = landing[at + (i % typesize) * elements + i / typesize];
      }
    }
  }
  if (plan->big_endian) {  // as the scatter kernel swaps each element (each part of a complex)
    const bool complex =
        chunk.data_type == DataType::kComplex64 || chunk.data_type == DataType::kComplex128;
    const size_t unit = DataTypeSize(chunk.data_type) / (complex ? 2 : 1);
    for (size_t at = 0; unit > 1 && at + unit <= decoded.size(); at += unit) {
      std::reverse(decoded.begin() + static_cast<std::ptrdiff_t>(at),
                   decoded.begin() + static_cast<std::ptrdiff_t>(at + unit));
    }
  }
  if (!cpu_status.ok())
    FuzzFail("the GPU path would decode a chunk the CPU decoder rejects", cpu_status);
  if (!std::ranges::equal(decoded, cpu_chunk))
    FuzzFail("the GPU path's chunk is not the CPU decoder's");
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
  CheckGpuReading(**chain, payload, status, first.span());
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
