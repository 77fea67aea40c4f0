#include "codec/codec_registry.h"

#include <map>
#include <mutex>
#include <vector>

#include "codec/blosc_codec.h"
#include "codec/bytes_codec.h"
#include "codec/bz2_codec.h"
#include "codec/cast_filter_codec.h"
#include "codec/crc32c_codec.h"
#include "codec/deflate_codec.h"
#include "codec/delta_codec.h"
#include "codec/fixed_scale_offset_codec.h"
#include "codec/lz4_codec.h"
#include "codec/sharding_codec.h"
#include "codec/shuffle_codec.h"
#include "codec/transpose_codec.h"
#include "codec/zstd_codec.h"
#include "util/fork_safety.h"

namespace zarrstream {
namespace {

CodecRegistration ArrayToArray(std::string name, ArrayToArrayFactory factory) {
  return {std::move(name), CodecKind::kArrayToArray, std::move(factory), {}, {}};
}

CodecRegistration ArrayToBytes(std::string name, ArrayToBytesFactory factory) {
  return {std::move(name), CodecKind::kArrayToBytes, {}, std::move(factory), {}};
}

CodecRegistration BytesToBytes(std::string name, BytesToBytesFactory factory) {
  return {std::move(name), CodecKind::kBytesToBytes, {}, {}, std::move(factory)};
}

// zarr-python writes numcodecs compressors into v3 metadata as "numcodecs.<id>" with numcodecs'
// configuration. Those with a v3 equivalent decode through it; only blosc's configuration differs
// (numcodecs gives shuffle as 0/1/2, or -1 for "bit-shuffle one-byte types, else byte-shuffle").
Result<std::unique_ptr<BytesToBytesCodec>> MakeNumcodecsBloscCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation) {
  nlohmann::json v3 = configuration.is_object() ? configuration : nlohmann::json::object();
  if (auto it = v3.find("shuffle"); it != v3.end() && it->is_number_integer()) {
    const int mode = it->get<int>();
    const size_t typesize = v3.contains("typesize") && v3["typesize"].is_number_unsigned()
                                ? v3["typesize"].get<size_t>()
                                : DataTypeSize(array_representation.data_type);
    if (mode < -1 || mode > 2) {
      return MetadataError("codec 'numcodecs.blosc': field 'shuffle' must be -1, 0, 1 or 2");
    }
    static constexpr const char* kModes[] = {"noshuffle", "shuffle", "bitshuffle"};
    *it = mode == -1 ? (typesize == 1 ? "bitshuffle" : "shuffle") : kModes[mode];
  }
  return MakeBloscCodec(v3, array_representation);
}

// The built-in codecs.
std::vector<CodecRegistration> BuiltinCodecs() {
  return {
      ArrayToArray("transpose", MakeTransposeCodec),
      ArrayToArray("numcodecs.delta", MakeDeltaCodec),
      ArrayToArray("numcodecs.fixedscaleoffset", MakeFixedScaleOffsetCodec),
      ArrayToArray("numcodecs.quantize", MakeQuantizeCodec),
      ArrayToArray("numcodecs.bitround", MakeBitRoundCodec),
      ArrayToArray("numcodecs.astype", MakeAsTypeCodec),
      ArrayToBytes("bytes", MakeBytesCodec),
      ArrayToBytes("sharding_indexed", MakeShardingCodec),
      BytesToBytes("zstd", MakeZstdCodec),
      BytesToBytes("gzip", MakeGzipCodec),
      BytesToBytes("numcodecs.zlib", MakeZlibCodec),
      BytesToBytes("numcodecs.lz4", MakeLz4Codec),
      BytesToBytes("blosc", MakeBloscCodec),
      BytesToBytes("numcodecs.zstd", MakeZstdCodec),
      BytesToBytes("numcodecs.gzip", MakeGzipCodec),
      BytesToBytes("numcodecs.blosc", MakeNumcodecsBloscCodec),
      BytesToBytes("crc32c", MakeCrc32cCodec),
      BytesToBytes("numcodecs.bz2", MakeBz2Codec),
      BytesToBytes("numcodecs.shuffle", MakeShuffleCodec),
  };
}

class Registry {
 public:
  Registry() {
    for (CodecRegistration& registration : BuiltinCodecs()) Add(std::move(registration));
  }

  void Add(CodecRegistration registration) {
    std::lock_guard<ForkSafeMutex> lock(mutex_);
    auto entry = std::make_unique<CodecRegistration>(std::move(registration));
    auto [it, inserted] = codecs_.try_emplace(entry->name);
    // FindCodec hands out raw pointers that callers may hold on to: a replaced registration is
    // kept alive rather than freed.
    if (!inserted) replaced_.push_back(std::move(it->second));
    it->second = std::move(entry);
  }

  const CodecRegistration* Find(std::string_view name) const {
    std::lock_guard<ForkSafeMutex> lock(mutex_);
    auto it = codecs_.find(name);
    return it == codecs_.end() ? nullptr : it->second.get();
  }

 private:
  mutable ForkSafeMutex mutex_;
  std::map<std::string, std::unique_ptr<CodecRegistration>, std::less<>> codecs_;
  std::vector<std::unique_ptr<CodecRegistration>> replaced_;
};

Registry& GlobalRegistry() {
  static Registry* registry = new Registry();  // never destroyed: codecs may outlive static dtors
  return *registry;
}

}  // namespace

void RegisterCodec(CodecRegistration registration) {
  GlobalRegistry().Add(std::move(registration));
}

const CodecRegistration* FindCodec(std::string_view name) { return GlobalRegistry().Find(name); }

}  // namespace zarrstream
