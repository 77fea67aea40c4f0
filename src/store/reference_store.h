// ReferenceStore: a read-only store over a Kerchunk reference set (the JSON that kerchunk and
// VirtualiZarr write and fsspec's ReferenceFileSystem reads): each key maps to inline bytes or to
// a byte range of another file, so netCDF4/HDF5, GRIB or TIFF archives read as Zarr without a
// copy.
//
// URL: "reference://" followed by where the reference file is: a local path ("reference://
// refs.json", "reference:///data/refs.json"), or a file://, http(s)://, s3:// or gs:// URL
// ("reference://s3://bucket/era5/refs.json"). "#path" after it roots the store at that group or
// array of the set ("reference:///data/refs.json#t2m" opens the array t2m with open_array), so a
// '#' in the location is taken for that. (fsspec spells it "reference://" with the file in its
// `fo` option; here it is all in the URL, so everything that takes a store URL takes it.)
//
// Reference sets, version 0 (a flat object of key → reference) and version 1 ({"version": 1,
// "templates": {...}, "gen": [...], "refs": {...}}). A reference is
//   "text"                   the key's bytes (UTF-8 of the JSON string: kerchunk writes binary
//                            whose bytes are all ASCII this way);
//   "base64:..."             the key's bytes, base64-encoded;
//   {...}                    the JSON text of the object (metadata written as objects);
//   [url]                    the whole file at `url`;
//   [url, offset, length]    `length` bytes of `url` from `offset`.
// In version 1, URLs are templates (reference_template.h) over "templates", and each "gen" entry
// adds the keys of a cartesian product of its "dimensions" (each {"start", "stop", "step"} or a
// list of integers), with the key, URL, offset and length rendered for each combination (later
// entries replace earlier ones with the same key, "gen" after "refs", as fsspec does). Parquet
// reference sets are not read.
//
// Target URLs: local paths, file://, http(s)://, s3:// and gs:// (each read through the store of
// its scheme, so the environment that configures those stores applies, see s3_store.h). A
// relative path is relative to the directory of the reference file (fsspec takes it relative to
// the working directory; both agree when they are the same). HTTP URLs with a query are refused.
//
// Reads: a key's ranges become ranges of its target, read in one call to the target's store,
// which merges nearby ranges (http_store.h). A key that is not in the set is kNotFound (a chunk
// that is not referenced reads as the fill value, as in fsspec); a reference whose target is
// missing, or which reaches past the target's end, is a kStorage error naming the key, the
// reference file and the target, never a fill value. Listing lists the set's keys; a key's size
// is its inline length or referenced length (0 for a whole-file reference, whose size is not in
// the set). Put and Delete are kUnsupported.
//
// Threads: every method may be called from any thread concurrently. The set is parsed once, at
// Open; the target stores are opened then too (no request is made before a read).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace zarrstream {

class ReferenceStore final : public Store {
 public:
  // Opens `url` ("reference://<location>").
  static Result<std::shared_ptr<ReferenceStore>> Open(std::string_view url);
  // Parses `json` (the reference file at `location`, which names it in messages and against
  // which relative target paths are resolved).
  static Result<std::shared_ptr<ReferenceStore>> FromJson(std::string_view location,
                                                          std::string_view json);

  const std::string& url() const override { return url_; }
  Future<uint64_t> Read(std::string_view key, std::span<const ByteRange> ranges,
                        std::span<ByteBuffer> outs) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix) override;
  Result<DirectoryListing> ListDirectory(std::string_view prefix) override;
  Status Put(std::string_view key, std::span<const std::byte> value) override;
  Status Delete(std::string_view key) override;

  // True when some target is read over the network (see IsRemoteStore).
  bool has_remote_targets() const { return has_remote_targets_; }
  size_t num_keys() const { return references_.size(); }
  // Lower-case hex SHA-256 of the reference file's bytes: the reference set's identity for
  // provenance.
  const std::string& content_sha256() const { return content_sha256_; }

  // A file that references point into, and the store and key it is read through.
  struct Target {
    std::string url;  // as the set names it (relative paths resolved), for messages
    std::shared_ptr<Store> store;
    std::string key;
  };
  struct Reference {
    static constexpr uint32_t kInline = UINT32_MAX;
    uint32_t target = kInline;  // index into targets_, or kInline
    bool whole_file = false;    // [url]: all of the target
    uint64_t offset = 0;
    uint64_t length = 0;
    std::string data;  // inline bytes
  };

 private:
  friend class ReferenceSetParser;
  ReferenceStore() = default;

  std::string url_;
  std::string location_;  // the reference file, for messages
  std::string prefix_;    // "<path>/" of a "#path" URL, or ""
  std::string content_sha256_;
  std::vector<Target> targets_;
  std::map<std::string, Reference, std::less<>> references_;
  bool has_remote_targets_ = false;
};

// The pieces of a read through a reference, shared with the Icechunk store (icechunk_store.h).

// Copies `ranges` of inline bytes `data` into `outs`; the total number of bytes. Errors name
// `context` (the key and the file that holds it).
Result<uint64_t> ReadInlineBytes(std::span<const std::byte> data, std::span<const ByteRange> ranges,
                                 std::span<ByteBuffer> outs, std::string_view context);

// Reads `ranges` of the referenced bytes of `key` in `store` into `outs`: the `length` bytes from
// `offset`, or the whole value when `whole` is set. A missing target or one too short is a
// kStorage error saying that `context` refers to `what` ("bytes 10..20 of s3://b/f.nc").
Future<uint64_t> ReadReferencedBytes(const std::shared_ptr<Store>& store, std::string key,
                                     bool whole, uint64_t offset, uint64_t length,
                                     std::span<const ByteRange> ranges, std::span<ByteBuffer> outs,
                                     std::string context, std::string what);

// Splits the URL or path of a file into the URL of its directory (a store to open) and its name
// (a key of that store).
Result<std::pair<std::string, std::string>> SplitFileUrl(std::string_view url);

}  // namespace zarrstream
