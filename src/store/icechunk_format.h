// The on-disk format of Icechunk repositories (transactional, versioned Zarr v3; the spec:
// icechunk.io, "Specification"), as far as reading needs it: object ids and their Crockford
// base32 names, the binary file header, and the snapshot and manifest flatbuffers of spec
// versions 1 and 2.
//
// Binary files (snapshots, manifests, transaction logs, spec 2's repo info) start with a header:
//   12 bytes  magic "ICE🧊CHUNK" (UTF-8)
//   24 bytes  the writing implementation's name, space-padded (ignored)
//    1 byte   spec version (1 or 2)
//    1 byte   file type (1 snapshot, 2 manifest, 3 attributes, 4 transaction log, 5 chunk,
//             6 repo info)
//    1 byte   compression of the rest (0 none, 1 zstd)
// and the rest is one flatbuffer. The flatbuffers are read with the library's low-level Table
// API (icechunk_format.cc describes each table's fields), after the library's Verifier has
// checked every offset this code follows, so a corrupt file is an error, never a wild read.
//
// Threads: everything here is immutable once built and may be shared between threads.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zarrstream/status.h"

namespace zarrstream::icechunk {

using ObjectId12 = std::array<uint8_t, 12>;  // snapshots, manifests, chunks
using ObjectId8 = std::array<uint8_t, 8>;    // nodes

enum class FileType : uint8_t {
  kSnapshot = 1,
  kManifest = 2,
  kAttributes = 3,
  kTransactionLog = 4,
  kChunk = 5,
  kRepoInfo = 6,
};

// The spec versions this reader understands.
constexpr int kMinSpecVersion = 1;
constexpr int kMaxSpecVersion = 2;
constexpr size_t kHeaderSize = 12 + 24 + 3;

// Crockford base32 (upper case, no padding), as object ids are named in paths and refs: 12 bytes
// give 20 characters.
std::string EncodeObjectId(std::span<const uint8_t> id);
// The inverse; nullopt unless `text` is exactly the encoding of `size` bytes (lower case and the
// Crockford aliases O→0, I/L→1 are accepted).
std::optional<std::vector<uint8_t>> DecodeObjectId(std::string_view text, size_t size);

// A binary file's flatbuffer, decompressed, and what its header said.
struct DecodedFile {
  int spec_version = 0;
  std::string implementation;  // the writer's name from the header, trimmed
  std::vector<uint8_t> flatbuffer;
};

// Checks the header of `bytes` (the magic, a spec version this reader knows, the file type
// `expected`, the compression) and decompresses the flatbuffer. `what` names the file in errors
// ("snapshot 1CECHNKREP0F1RSTCMT0 of repository file:///data/repo").
Result<DecodedFile> DecodeFile(std::span<const std::byte> bytes, FileType expected,
                               std::string_view what);

// One dimension of an array: its length and (spec 1) chunk length or (spec 2) number of chunks.
struct DimensionShape {
  uint64_t array_length = 0;
  uint64_t chunk_length = 0;  // spec 1; 0 in spec 2
  uint64_t num_chunks = 0;    // spec 2; 0 in spec 1
};

// A manifest an array has chunk references in, and the chunk-index box [from, to) it covers.
struct ManifestRef {
  ObjectId12 id{};
  std::vector<std::pair<uint32_t, uint32_t>> extents;
};

struct Node {
  ObjectId8 id{};
  std::string path;       // "/" for the root, "/a/b" below it
  std::string user_data;  // the node's zarr.json as the writer stored it
  bool is_array = false;
  std::vector<DimensionShape> shape;
  std::vector<ManifestRef> manifests;
};

struct Snapshot {
  ObjectId12 id{};
  std::optional<ObjectId12> parent_id;  // spec 1 only (spec 2 keeps it in the repo info)
  uint64_t flushed_at_us = 0;           // microseconds since 1970-01-01 UTC
  std::string message;
  std::vector<Node> nodes;  // sorted by path, as written
};

// Parses a snapshot flatbuffer of `spec_version`.
Result<Snapshot> ParseSnapshot(std::span<const uint8_t> flatbuffer, int spec_version,
                               std::string_view what);

// A chunk reference of a manifest.
struct ChunkRef {
  enum class Kind : uint8_t { kInline, kNative, kVirtual };
  Kind kind = Kind::kInline;
  std::span<const uint8_t> inline_data;  // kInline: into the manifest's buffer
  uint64_t offset = 0;                   // kNative, kVirtual
  uint64_t length = 0;
  ObjectId12 chunk_id{};  // kNative: chunks/<id> of the repository
  std::string location;   // kVirtual: the URL of the file holding the chunk
  std::string checksum_etag;
  uint32_t checksum_last_modified = 0;  // seconds since the epoch; 0: none
};

// A manifest file, verified once, queried in place.
class Manifest {
 public:
  static Result<std::shared_ptr<const Manifest>> Parse(std::vector<uint8_t> flatbuffer,
                                                       int spec_version, std::string_view what);

  const ObjectId12& id() const { return id_; }
  // The reference of chunk `index` of node `node`, nullopt when the manifest has none.
  Result<std::optional<ChunkRef>> Find(const ObjectId8& node,
                                       std::span<const uint32_t> index) const;
  // Calls `fn` with each chunk index and reference of `node`, in index order.
  Status ForEach(const ObjectId8& node,
                 const std::function<void(std::span<const uint32_t>, const ChunkRef&)>& fn) const;

 private:
  Manifest() = default;
  // The refs vector of `node`'s ArrayManifest, or nullptr.
  const void* ArrayRefs(const ObjectId8& node) const;

  std::vector<uint8_t> buffer_;
  int spec_version_ = 1;
  ObjectId12 id_{};
  std::string what_;
};

// What spec 2's repo info file says that reading needs.
struct RepoInfo {
  struct NamedSnapshot {
    std::string name;
    ObjectId12 snapshot{};
  };
  std::vector<NamedSnapshot> branches;
  std::vector<NamedSnapshot> tags;
  std::vector<std::string> deleted_tags;
  // Parent of each snapshot the repo info lists (spec 2 keeps parents here).
  std::vector<std::pair<ObjectId12, std::optional<ObjectId12>>> parents;
  // The url_prefix of each virtual chunk container in the repository's configuration (a
  // FlexBuffer of icechunk's RepositoryConfig); none when the repository has no configuration.
  std::vector<std::string> virtual_prefixes;
};

Result<RepoInfo> ParseRepoInfo(std::span<const uint8_t> flatbuffer, int spec_version,
                               std::string_view what);

}  // namespace zarrstream::icechunk
