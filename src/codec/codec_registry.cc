#include "codec/codec_registry.h"

#include <map>
#include <mutex>
#include <vector>

#include "codec/blosc_codec.h"
#include "codec/bytes_codec.h"
#include "codec/bz2_codec.h"
#include "codec/crc32c_codec.h"
#include "codec/deflate_codec.h"
#include "codec/delta_codec.h"
#include "codec/fixed_scale_offset_codec.h"
#include "codec/lz4_codec.h"
#include "codec/sharding_codec.h"
#include "codec/shuffle_codec.h"
#include "codec/transpose_codec.h"
#include "codec/zstd_codec.h"

namespace zarrstream {
namespace {

CodecRegistration ArrayToArray(std::string name, ArrayToArrayFactory factory) {
  return {std::move(name), CodecKind::kArrayToArray, std::move(factory), {}, {}, false};
}

CodecRegistration ArrayToBytes(std::string name, ArrayToBytesFactory factory) {
  return {std::move(name), CodecKind::kArrayToBytes, {}, std::move(factory), {}, false};
}

CodecRegistration BytesToBytes(std::string name, BytesToBytesFactory factory,
                               bool gpu_decodable) {
  return {std::move(name), CodecKind::kBytesToBytes, {}, {}, std::move(factory), gpu_decodable};
}

// The built-in codecs. gpu_decodable marks those the GPU path decodes with nvCOMP.
std::vector<CodecRegistration> BuiltinCodecs() {
  return {
      ArrayToArray("transpose", MakeTransposeCodec),
      ArrayToArray("numcodecs.delta", MakeDeltaCodec),
      ArrayToArray("numcodecs.fixedscaleoffset", MakeFixedScaleOffsetCodec),
      ArrayToBytes("bytes", MakeBytesCodec),
      ArrayToBytes("sharding_indexed", MakeShardingCodec),
      BytesToBytes("zstd", MakeZstdCodec, /*gpu_decodable=*/true),
      BytesToBytes("gzip", MakeGzipCodec, /*gpu_decodable=*/true),
      BytesToBytes("numcodecs.zlib", MakeZlibCodec, /*gpu_decodable=*/true),
      BytesToBytes("numcodecs.lz4", MakeLz4Codec, /*gpu_decodable=*/true),
      BytesToBytes("blosc", MakeBloscCodec, /*gpu_decodable=*/true),
      BytesToBytes("crc32c", MakeCrc32cCodec, /*gpu_decodable=*/false),
      BytesToBytes("numcodecs.bz2", MakeBz2Codec, /*gpu_decodable=*/false),
      BytesToBytes("numcodecs.shuffle", MakeShuffleCodec, /*gpu_decodable=*/false),
  };
}

class Registry {
 public:
  Registry() {
    for (CodecRegistration& registration : BuiltinCodecs()) Add(std::move(registration));
  }

  void Add(CodecRegistration registration) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto entry = std::make_unique<CodecRegistration>(std::move(registration));
    auto [it, inserted] = codecs_.try_emplace(entry->name);
    // FindCodec hands out raw pointers that callers may hold on to: a replaced registration is
    // kept alive rather than freed.
    if (!inserted) replaced_.push_back(std::move(it->second));
    it->second = std::move(entry);
  }

  const CodecRegistration* Find(std::string_view name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = codecs_.find(name);
    return it == codecs_.end() ? nullptr : it->second.get();
  }

 private:
  mutable std::mutex mutex_;
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

const CodecRegistration* FindCodec(std::string_view name) {
  return GlobalRegistry().Find(name);
}

}  // namespace zarrstream
