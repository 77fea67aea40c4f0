#include "codec/sharding_codec.h"

namespace zarrstream {

// Replaced by the real implementation in the next commit of this series.
Result<std::unique_ptr<ArrayToBytesCodec>> MakeShardingCodec(const nlohmann::json&,
                                                             const ChunkRepresentation&) {
  return UnsupportedError("sharding_indexed is not implemented yet");
}

}  // namespace zarrstream
