// zarrstream's C++ API for Zarr arrays and groups: open, inspect, read and write regions, create.
//
// Mirrors the Python API (zarrstream.open_array / open_group). Arrays and groups are cheap handles
// to shared immutable state: copy them freely and use them from any number of threads at once.
// A fork()ed child may use the handles its parent opened, and open new ones, as the parent does:
// the decode pools and HTTP I/O threads start anew in the child at their first use there.
//
//   auto array = zarrstream::Array::Open("era5.zarr/temperature");
//   std::vector<float> out(array->num_elements());
//   auto status = array->Read({0, 0, 0}, array->shape(), out.data());
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zarrstream/data_type.h"
#include "zarrstream/status.h"

namespace zarrstream {

namespace internal {
struct ArrayState;
struct GroupState;
}  // namespace internal

struct OpenOptions {
  // Threads decoding chunks of one read. 0: a process-wide pool of one thread per core this process
  // may run on (its CPU affinity), shared by every array opened with 0 (so many open arrays never
  // multiply threads). Otherwise the array (and, for a group, every array opened from it) gets a
  // pool of its own of this size.
  size_t num_threads = 0;
  // A chunk that is not stored reads as the fill value (the Zarr spec). When true it is a kNotFound
  // error naming the chunk instead, for users who must know that every chunk was written.
  bool missing_chunks_are_errors = false;
  // Icechunk repositories (a URL whose root holds one): the branch, tag or snapshot id to read;
  // empty reads branch "main". Set for a URL that holds no repository, it is an error.
  std::string ref;
};

// Which data a store held when it was opened, for provenance (Loader::dataset_identity): a run
// that resumes on another identity would not see the data it started with.
struct StoreIdentity {
  std::string url;  // as given to open it, without a user:password it held
  // "icechunk": `id` is the snapshot read (Crockford base32), which the branch or tag named then.
  // "kerchunk": `id` is the lower-case hex SHA-256 of the reference file.
  // "zarr": `id` is the lower-case hex SHA-256 of its metadata documents as opened: with
  // consolidated metadata, the root's documents that hold it (v3 zarr.json; v2 .zattrs, .zgroup,
  // .zmetadata), which describe every member; without, the root's documents and those of every
  // array in it, by name. Chunks are not hashed: rewritten values under the same metadata keep
  // the identity.
  std::string kind;
  std::string id;
  bool operator==(const StoreIdentity&) const = default;
};

// What Array::Create writes: a Zarr v3 array.
struct ArraySpec {
  std::vector<uint64_t> shape;
  DataType dtype = DataType::kFloat32;
  // The read-chunk shape: the chunk grid, or the inner chunks when `shard_shape` is set.
  std::vector<uint64_t> chunks;
  // When set, the stored objects are shards of this shape (each a multiple of `chunks`), written
  // with sharding_indexed (inner chunks encoded with `compressor`; index [bytes, crc32c] at end).
  std::optional<std::vector<uint64_t>> shard_shape;
  // The bytes→bytes compressor, as a short spec: "none", "zstd[:level]", "gzip[:level]",
  // "lz4" (numcodecs.lz4), "blosc[:cname[:clevel[:shuffle|bitshuffle|noshuffle]]]" (see
  // ParseCompressorSpec in src/codec/compressor_spec.h for the defaults); or a complete zarr.json
  // "codecs" JSON list, which then replaces the whole chain: `shard_shape` must be unset and
  // `chunks` is the chunk grid (the shards, when the list holds sharding_indexed).
  // zstd frames carry their content size.
  std::string compressor = "zstd:3";
  // Dimension names ("" for unnamed); empty for none.
  std::vector<std::string> dims;
  // The fill value as JSON in zarr.json form (0, "NaN", true, ...); null: zero of the dtype.
  std::string fill_value_json = "null";
  // The attributes as a JSON object.
  std::string attributes_json = "{}";
};

struct CreateOptions {
  // Replace an array or group already at the URL: every key below it is removed first (its
  // metadata, chunks and members), as zarr-python's mode "w" does; a store that cannot list
  // keeps its stale chunks and loses only the metadata documents. Otherwise an existing node
  // (zarr.json, .zarray or .zgroup) is a kInvalidArgument error.
  bool overwrite = false;
};

class Array {
 public:
  // Opens the array at `url`: a local path or file:// URL (other schemes as their stores are
  // registered). Reads zarr.json (v3), else .zarray and .zattrs (v2).
  static Result<Array> Open(std::string_view url, const OpenOptions& options = {});

  // The array's URL, safe to print (no credentials).
  const std::string& url() const;
  // The array's path inside its store ("" when opened at its own root).
  const std::string& path() const;

  int zarr_format() const;
  const std::vector<uint64_t>& shape() const;
  size_t rank() const { return shape().size(); }
  uint64_t num_elements() const;
  // The storage type of the values Read returns: int64 for datetime64/timedelta64; for text
  // kinds (see extended_type) a placeholder nothing reads.
  DataType dtype() const;
  // Set for types beyond Zarr's numeric core (strings, datetime64, ...; see ExtendedType).
  const std::optional<ExtendedType>& extended_type() const;
  // True for Zarr's numeric core types: what the loader, `stats` and the GPU path take.
  bool is_numeric() const;
  // numpy's type string of the values: "<f4", "<M8[ns]", "<U4", "|S3", "|O".
  std::string numpy_dtype() const;
  // The shape of the chunks a read decodes: the inner chunks of a sharded array.
  std::vector<uint64_t> chunks() const;
  // The shard shape (the stored objects' grid) of a sharded array; empty when not sharded.
  std::optional<std::vector<uint64_t>> shard_shape() const;
  // The shape of the grid of stored objects (chunks, or shards when sharded).
  std::vector<uint64_t> grid_shape() const;
  // Dimension names; empty when the metadata gives none ("" for an unnamed dimension).
  const std::vector<std::string>& dims() const;
  // The attributes as a JSON object.
  std::string attributes_json() const;
  // The fill value: DataTypeSize(dtype()) bytes, native byte order.
  std::span<const std::byte> fill_value() const;
  // Text kinds: the fill value as ReadText gives an element.
  const std::string& text_fill_value() const;
  // True for v2 arrays whose fill_value is null (missing chunks then read as zeros).
  bool fill_value_is_null() const;
  // The codec chain as a JSON list, in zarr.json form (v2 arrays: normalised to v3 names).
  std::string codecs_json() const;
  // The metadata as a v3 zarr.json document.
  std::string metadata_json() const;

  // Reads the region [start, start + shape) into `out`, decoding chunks in parallel straight into
  // place. `out_byte_strides` gives the byte stride of each output dimension; empty means C-order
  // contiguous. Values are in native byte order. Blocks until done; thread-safe.
  // Errors name the store, the array and the chunk key.
  Status Read(std::span<const uint64_t> start, std::span<const uint64_t> shape, void* out,
              std::span<const int64_t> out_byte_strides = {}) const;

  // Reads the region [start, start + shape) of an array of a text kind (ExtendedType::is_text):
  // one string per element, C order: UTF-8 text for strings and numpy "U" values, the bytes for
  // bytes and "S" values (numpy "U"/"S" trailing NULs dropped), JSON text for JSON objects.
  // Chunks are decoded one after another on the calling thread (text arrays are coordinates and
  // labels: small). Read of a text array, and ReadText of any other, are kInvalidArgument.
  Result<std::vector<std::string>> ReadText(std::span<const uint64_t> start,
                                            std::span<const uint64_t> shape) const;

  // Reads the whole array (C order) into `out` of num_elements() * DataTypeSize(dtype()) bytes.
  Status ReadAll(void* out) const;

  // Creates the array at `url` (its zarr.json; parent groups are not created) and returns it open.
  // The spec is validated and the codec chain prepared before anything is stored; errors are
  // kInvalidArgument and name the URL.
  static Result<Array> Create(std::string_view url, const ArraySpec& spec,
                              const CreateOptions& create = {}, const OpenOptions& options = {});

  // Writes `data` (native byte order; `data_byte_strides` as in Read, any sign, 0 to broadcast;
  // empty for C order) to the region [start, start + shape), encoding chunks in parallel on the
  // array's pool. Chunks (or shards) the region covers wholly are encoded and stored without
  // reading; partly covered ones are read, merged and rewritten (in a shard, only the inner chunks
  // the region covers in part are decoded; untouched ones keep their stored bytes). Stored chunks
  // are full chunk shape, the fill value past the array's edge. A chunk whose values all equal
  // the fill value bit for bit is not stored (a stored one is deleted; in a shard it is marked
  // empty, and a shard left empty is deleted), as zarr-python does by default.
  // Each stored object is replaced whole with one Put (file store: write + rename), so a reader
  // never sees a torn chunk or shard.
  // Concurrency: writes touching disjoint sets of stored objects (chunks, or shards when
  // sharded) may run at once, from threads of one process or from separate processes (a
  // `rechunk --part i/N` job writes disjoint shards per process). Writes that touch the same
  // stored object concurrently must be serialised by the caller: the last Put wins, and a
  // read-modify-write can lose the other writer's part. Blocks until done; errors name the array
  // and the chunk key.
  Status Write(std::span<const uint64_t> start, std::span<const uint64_t> shape, const void* data,
               std::span<const int64_t> data_byte_strides = {}) const;

  // Replaces the attributes in the stored zarr.json (other metadata unchanged; v3 arrays only).
  // This handle keeps the attributes it was opened with; open the array again to see them.
  Status SetAttributes(std::string_view attributes_json) const;

  const internal::ArrayState& state() const { return *state_; }

 private:
  friend class Group;
  explicit Array(std::shared_ptr<const internal::ArrayState> state) : state_(std::move(state)) {}
  std::shared_ptr<const internal::ArrayState> state_;
};

class Group {
 public:
  // Opens the group at `url`. Uses consolidated metadata when present (v3 inline
  // "consolidated_metadata", v2 .zmetadata), so opening members costs no further reads.
  static Result<Group> Open(std::string_view url, const OpenOptions& options = {});

  const std::string& url() const;
  const std::string& path() const;
  int zarr_format() const;
  std::string attributes_json() const;
  bool consolidated() const;

  // Names of the direct members, sorted.
  const std::vector<std::string>& array_names() const;
  const std::vector<std::string>& group_names() const;

  // Opens a member by relative path ("temperature", "sub/temperature").
  Result<Array> OpenArray(std::string_view path) const;
  Result<Group> OpenGroup(std::string_view path) const;

  // Opens this group again (same store, pool and options): a handle is a snapshot, so members
  // created and metadata consolidated since it was opened show only in the handle this returns.
  Result<Group> Reopen() const;

  // Creates a Zarr v3 group at `url` with `attributes_json` and returns it open.
  static Result<Group> Create(std::string_view url, std::string_view attributes_json = "{}",
                              const CreateOptions& create = {}, const OpenOptions& options = {});
  // Creates members below this group (path relative to it; parent groups are not created), with
  // this group's pool and options. This handle's member lists do not change (see Reopen), and a
  // consolidated group lists new members only after ConsolidateMetadata.
  Result<Array> CreateArray(std::string_view path, const ArraySpec& spec,
                            const CreateOptions& create = {}) const;
  Result<Group> CreateGroup(std::string_view path, std::string_view attributes_json = "{}",
                            const CreateOptions& create = {}) const;
  // Writes the metadata of every v3 node below this group (found by listing the store) into its
  // zarr.json as inline consolidated metadata, in the form zarr-python writes, so opening the
  // hierarchy takes one read. Folders without zarr.json and v2 nodes are not members.
  Status ConsolidateMetadata() const;
  // Replaces the attributes in the stored zarr.json (members and consolidated metadata unchanged;
  // v3 groups only). This handle keeps the attributes it was opened with (see Reopen).
  Status SetAttributes(std::string_view attributes_json) const;

  const internal::GroupState& state() const { return *state_; }

 private:
  explicit Group(std::shared_ptr<const internal::GroupState> state) : state_(std::move(state)) {}
  std::shared_ptr<const internal::GroupState> state_;
};

}  // namespace zarrstream
