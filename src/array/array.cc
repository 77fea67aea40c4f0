// Array handles: opening, metadata accessors. The read path is in array_read.cc.
#include <algorithm>
#include <mutex>

#include "array/array_state.h"
#include "array/node_metadata_io.h"
#include "codec/sharding_codec.h"
#include "metadata/v3_metadata.h"
#include "store/store_registry.h"
#include "util/fork_safety.h"

namespace zarrstream {

namespace internal {

std::string ArrayState::Describe() const {
  if (path.empty()) return "array at " + url;
  return "array '" + path + "' in " + store->url();
}

std::string ArrayState::ChunkKey(std::span<const uint64_t> coords) const {
  return JoinKey(path, metadata.chunk_key_encoding.EncodeKey(coords));
}

std::shared_ptr<ThreadPool> PoolFor(const OpenOptions& options) {
  if (options.num_threads > 0) return std::make_shared<ThreadPool>(options.num_threads);
  static ForkSafeMutex mutex;
  static std::weak_ptr<ThreadPool> shared;
  std::lock_guard<ForkSafeMutex> lock(mutex);
  std::shared_ptr<ThreadPool> pool = shared.lock();
  if (!pool) {
    pool = std::make_shared<ThreadPool>(0);
    shared = pool;
  }
  return pool;
}

Result<std::shared_ptr<const ArrayState>> MakeArrayState(std::shared_ptr<Store> store,
                                                         std::string path, ArrayMetadata metadata,
                                                         std::shared_ptr<ThreadPool> pool,
                                                         const OpenOptions& options) {
  auto state = std::make_shared<ArrayState>();
  state->url = NodeUrl(*store, path);
  state->store = std::move(store);
  state->path = std::move(path);
  state->metadata = std::move(metadata);
  state->pool = std::move(pool);
  state->options = options;
  if (state->metadata.unsupported) {
    return state->metadata.unsupported->WithContext("opening " + state->Describe());
  }
  if (state->metadata.extended_type && state->metadata.extended_type->is_text()) {
    ZS_ASSIGN_OR_RETURN_CTX(state->text, TextChunkDecoder::Make(state->metadata),
                            "opening " + state->Describe());
    state->read_chunk_shape = state->metadata.chunk_shape;
    return std::shared_ptr<const ArrayState>(std::move(state));
  }
  ChunkRepresentation chunk;
  chunk.data_type = state->metadata.data_type;
  chunk.shape = state->metadata.chunk_shape;
  chunk.fill_value = state->metadata.fill_value;
  ZS_ASSIGN_OR_RETURN_CTX(state->chain, CodecChain::Make(state->metadata.codecs, chunk),
                          "opening " + state->Describe());
  state->read_chunk_shape = state->chain->sharding() ? state->chain->sharding()->inner_chunk_shape()
                                                     : state->metadata.chunk_shape;
  return std::shared_ptr<const ArrayState>(std::move(state));
}

}  // namespace internal

Result<Array> Array::Open(std::string_view url, const OpenOptions& options) {
  ZS_ASSIGN_OR_RETURN(auto root, OpenRootNode(url, options.ref));
  auto& [store, node] = root;
  if (!std::holds_alternative<ArrayMetadata>(node)) {
    return InvalidArgumentError(store->url() + " is a group, not an array (use open_group)");
  }
  ZS_ASSIGN_OR_RETURN(auto state,
                      internal::MakeArrayState(store, "", std::get<ArrayMetadata>(std::move(node)),
                                               internal::PoolFor(options), options));
  return Array(std::move(state));
}

const std::string& Array::url() const { return state_->url; }
const std::string& Array::path() const { return state_->path; }
int Array::zarr_format() const { return state_->metadata.zarr_format; }
const std::vector<uint64_t>& Array::shape() const { return state_->metadata.shape; }
uint64_t Array::num_elements() const { return state_->metadata.num_elements(); }
DataType Array::dtype() const { return state_->metadata.data_type; }
std::vector<uint64_t> Array::chunks() const { return state_->read_chunk_shape; }
std::optional<std::vector<uint64_t>> Array::shard_shape() const {
  if (!state_->chain || !state_->chain->sharding()) return std::nullopt;
  return state_->metadata.chunk_shape;
}
std::vector<uint64_t> Array::grid_shape() const { return state_->metadata.grid_shape(); }
const std::vector<std::string>& Array::dims() const { return state_->metadata.dimension_names; }
std::string Array::attributes_json() const { return state_->metadata.attributes.dump(); }
std::span<const std::byte> Array::fill_value() const { return state_->metadata.fill_value; }
bool Array::fill_value_is_null() const { return state_->metadata.fill_value_is_null; }
std::string Array::codecs_json() const {
  return (state_->chain ? state_->chain->ToJson() : state_->text->ToJson()).dump();
}
const std::optional<ExtendedType>& Array::extended_type() const {
  return state_->metadata.extended_type;
}
bool Array::is_numeric() const { return !state_->metadata.extended_type; }
std::string Array::numpy_dtype() const {
  const auto& extended = state_->metadata.extended_type;
  return extended ? extended->NumpyTypeString() : NumpyTypeString(dtype());
}
const std::string& Array::text_fill_value() const { return state_->metadata.text_fill_value; }
std::string Array::metadata_json() const { return ArrayMetadataToV3Json(state_->metadata).dump(2); }

Status Array::ReadAll(void* out) const {
  std::vector<uint64_t> start(rank(), 0);
  return Read(start, shape(), out);
}

}  // namespace zarrstream
