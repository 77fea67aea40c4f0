// The shared, immutable state behind zarrstream::Array and zarrstream::Group handles.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "array/text_read.h"
#include "codec/codec_chain.h"
#include "metadata/array_metadata.h"
#include "store/store.h"
#include "util/thread_pool.h"
#include "zarrstream/array.h"

namespace zarrstream::internal {

struct ArrayState {
  std::shared_ptr<Store> store;
  std::string path;  // key prefix of the array in the store ("" at the root)
  std::string url;   // store URL + path, for users and messages
  ArrayMetadata metadata;
  // Prepared for one stored object (chunk or shard); null for text kinds, which `text` decodes.
  std::shared_ptr<const CodecChain> chain;
  std::shared_ptr<const TextChunkDecoder> text;
  std::vector<uint64_t> read_chunk_shape;  // inner chunk shape when sharded
  std::shared_ptr<ThreadPool> pool;
  OpenOptions options;

  // "array 'temperature' in file:///data/era5.zarr" (or "array at <url>" at a store root).
  std::string Describe() const;
  // The store key of the stored object at grid index `coords`.
  std::string ChunkKey(std::span<const uint64_t> coords) const;
};

struct GroupState {
  std::shared_ptr<Store> store;
  std::string path;
  std::string url;
  GroupMetadata metadata;
  std::shared_ptr<const ConsolidatedMetadata> consolidated;  // relative to this group, or null
  std::vector<std::string> array_names;
  std::vector<std::string> group_names;
  std::shared_ptr<ThreadPool> pool;
  OpenOptions options;
};

// The pool for `options`: the shared default pool, or a new one of options.num_threads.
std::shared_ptr<ThreadPool> PoolFor(const OpenOptions& options);

// Builds an ArrayState for parsed metadata (prepares the codec chain).
Result<std::shared_ptr<const ArrayState>> MakeArrayState(std::shared_ptr<Store> store,
                                                         std::string path, ArrayMetadata metadata,
                                                         std::shared_ptr<ThreadPool> pool,
                                                         const OpenOptions& options);

// Builds a GroupState for parsed metadata: member names from its consolidated metadata, else from
// listing the store.
Result<std::shared_ptr<const GroupState>> MakeGroupState(std::shared_ptr<Store> store,
                                                         std::string path, GroupMetadata metadata,
                                                         std::shared_ptr<ThreadPool> pool,
                                                         const OpenOptions& options);

}  // namespace zarrstream::internal
