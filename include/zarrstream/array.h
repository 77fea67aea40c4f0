// zarrstream's C++ API for Zarr arrays and groups: open, inspect, read regions.
//
// Mirrors the Python API (zarrstream.open_array / open_group). Arrays and groups are cheap handles
// to shared immutable state: copy them freely and use them from any number of threads at once.
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
  // Threads decoding chunks of one read. 0: a process-wide pool of hardware_concurrency() threads,
  // shared by every array opened with 0 (so many open arrays never multiply threads). Otherwise the
  // array (and, for a group, every array opened from it) gets a pool of its own of this size.
  size_t num_threads = 0;
  // A chunk that is not stored reads as the fill value (the Zarr spec). When true it is a kNotFound
  // error naming the chunk instead, for users who must know that every chunk was written.
  bool missing_chunks_are_errors = false;
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
  DataType dtype() const;
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

  // Reads the whole array (C order) into `out` of num_elements() * DataTypeSize(dtype()) bytes.
  Status ReadAll(void* out) const;

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

 private:
  explicit Group(std::shared_ptr<const internal::GroupState> state) : state_(std::move(state)) {}
  std::shared_ptr<const internal::GroupState> state_;
};

}  // namespace zarrstream
