// IcechunkStore: a read-only store over one snapshot of an Icechunk repository (transactional,
// versioned Zarr v3; icechunk_format.h for the files), so everything that reads a Zarr store reads
// a repository's branch, tag or snapshot.
//
// A repository is recognised by its layout, whatever the transport of its URL (a local path,
// file://, http(s)://, s3://, gs://): spec 1 keeps its branches in refs/branch.<name>/ref.json
// (every repository has refs/branch.main), spec 2 keeps branches and tags in the file "repo".
// The repository's own objects (refs, repo info, snapshots, manifests, chunks) are read through
// the store of its URL.
//
// Keys: "<path>/zarr.json" is the metadata of the group or array at <path> as the snapshot holds
// it ("zarr.json" for the root); "<array>/c/<i>/<j>..." is a chunk (Icechunk names chunks this way
// whatever the array's chunk_key_encoding). A chunk is inline bytes of its manifest, a byte range
// of chunks/<id> of the repository, or a virtual reference: a byte range of a file elsewhere
// (read like a Kerchunk reference's target, reference_store.h), allowed only under the url_prefix
// of one of the repository's virtual chunk containers (spec 1: config.yaml; spec 2 keeps them in
// the repo info's configuration, which is not read yet, so spec 2 virtual chunks are refused), and
// refused when the reference carries an ETag (which this reader cannot check) or a
// last-modified time it cannot check (only local files' modification times are checked). A chunk
// no manifest references is kNotFound (the fill value).
//
// Manifests are read when a chunk of theirs is first asked for, and kept. Errors name the
// repository, the ref, and the array and chunk.
//
// Threads: every method may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/icechunk_format.h"
#include "store/store.h"

namespace zarrstream {

class IcechunkStore final : public Store {
 public:
  // Whether `store` holds an Icechunk repository at its root (one or two small reads). Errors
  // other than "not found" are returned.
  static Result<bool> IsRepository(Store& store);

  // Opens the snapshot that `ref` names in the repository held by `repository`: a branch, else a
  // tag, else a snapshot id (20 characters of Crockford base32). Empty: branch "main".
  static Result<std::shared_ptr<IcechunkStore>> Open(const std::shared_ptr<Store>& repository,
                                                     std::string_view ref);

  // What was opened, for `zarrstream inspect` and provenance.
  struct SnapshotInfo {
    std::string ref;        // as asked for ("main" when none was)
    std::string ref_kind;   // "branch", "tag" or "snapshot"
    std::string id;         // the snapshot id, Crockford base32
    std::string parent_id;  // "" for the first snapshot or when unknown
    uint64_t flushed_at_us = 0;
    std::string message;
    int spec_version = 0;
  };
  const SnapshotInfo& snapshot() const { return info_; }
  const std::string& repository_url() const { return repository_->url(); }
  const std::vector<std::string>& virtual_chunk_prefixes() const { return virtual_prefixes_; }
  // True when the repository, or a virtual chunk container, is read over the network (see
  // IsRemoteStore).
  bool is_remote() const;

  const std::string& url() const override { return url_; }
  Future<uint64_t> Read(std::string_view key, std::span<const ByteRange> ranges,
                        std::span<ByteBuffer> outs) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix) override;
  Result<DirectoryListing> ListDirectory(std::string_view prefix) override;
  Status Put(std::string_view key, std::span<const std::byte> value) override;
  Status Delete(std::string_view key) override;

 private:
  IcechunkStore() = default;

  // The manifest `id`, read on first use.
  Result<std::shared_ptr<const icechunk::Manifest>> GetManifest(const icechunk::ObjectId12& id);
  // The reference of chunk `index` of `node`, nullopt when no manifest has one.
  Result<std::optional<icechunk::ChunkRef>> FindChunk(const icechunk::Node& node,
                                                      std::span<const uint32_t> index,
                                                      std::shared_ptr<const void>* keep_alive);
  Future<uint64_t> ReadVirtual(const icechunk::ChunkRef& ref, std::span<const ByteRange> ranges,
                               std::span<ByteBuffer> outs, const std::string& context);
  // "repository <url> at <ref kind> <ref> (snapshot <id>)", for messages.
  std::string Describe() const;

  std::shared_ptr<Store> repository_;
  std::string url_;
  SnapshotInfo info_;
  icechunk::Snapshot snapshot_;
  std::map<std::string, const icechunk::Node*, std::less<>> nodes_;  // by key prefix ("" root)
  std::vector<std::string> virtual_prefixes_;

  std::mutex mu_;  // guards the caches below
  std::map<icechunk::ObjectId12, std::shared_ptr<const icechunk::Manifest>> manifests_;
  std::map<std::string, std::shared_ptr<Store>> virtual_stores_;  // by directory URL
};

}  // namespace zarrstream
