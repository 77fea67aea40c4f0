// ReferenceStore: a read-only store over a Kerchunk reference set (the JSON that kerchunk and
// VirtualiZarr write and fsspec's ReferenceFileSystem reads, or fsspec's Parquet reference set):
// each key maps to inline bytes or to a byte range of another file, so netCDF4/HDF5, GRIB or TIFF
// archives read as Zarr without a copy.
//
// URL: "reference://" followed by where the reference set is: a local path ("reference://
// refs.json", "reference:///data/refs.json"), or a file://, http(s)://, s3:// or gs:// URL
// ("reference://s3://bucket/era5/refs.json"). "#path" after it roots the store at that group or
// array of the set ("reference:///data/refs.json#t2m" opens the array t2m with open_array), so a
// '#' in the location is taken for that. (fsspec spells it "reference://" with the file in its
// `fo` option; here it is all in the URL, so everything that takes a store URL takes it.)
//
// JSON reference sets, version 0 (a flat object of key → reference) and version 1 ({"version": 1,
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
// entries replace earlier ones with the same key, "gen" after "refs", as fsspec does).
//
// Parquet reference sets (fsspec's LazyReferenceMapper, kerchunk.df.refs_to_dataframe): a
// directory holding ".zmetadata", {"metadata": {key: JSON document}, "record_size": N}, and for
// each array ("field") with a ".zarray" in it, record files FIELD/refs.R.parq (parquet_file.h)
// of N rows each: row r of record R is the chunk whose C-order number in the array's chunk grid
// is R * N + r, with columns "path" (the target URL; null: no target), "offset", "size" (both 0:
// the whole file) and "raw" (inline bytes; they win over "path"). A row with neither path nor raw
// is a missing chunk, and so is every chunk of a record file that does not exist (fsspec writes no
// record file whose chunks are all missing). The set is recognised by its location: a local
// directory, a URL ending in '/', a location whose ".zmetadata" is named, or a remote location
// that is no file but has a ".zmetadata" under it. Record files are read when a chunk of theirs is
// first asked for, and kept in a cache of bounded size (kRecordCacheBytes). Paths are not
// templates (fsspec does not render them); one holding "{{" is an error.
//
// Target URLs: local paths, file://, http(s)://, s3:// and gs:// (each read through the store of
// its scheme, so the environment that configures those stores applies, see s3_store.h). A
// relative path is relative to the directory of the reference file or of the Parquet set's
// directory (fsspec takes it relative to the working directory; both agree when they are the
// same). HTTP URLs with a query are refused.
//
// Reads: a key's ranges become ranges of its target, read in one call to the target's store,
// which merges nearby ranges (http_store.h). A key that is not in the set is kNotFound (a chunk
// that is not referenced reads as the fill value, as in fsspec); a reference whose target is
// missing, or which reaches past the target's end, is a kStorage error naming the key, the
// reference file and the target, never a fill value. Listing lists the set's keys; a key's size
// is its inline length or referenced length (0 for a whole-file reference, whose size is not in
// the set). Put and Delete are kUnsupported.
//
// Threads: every method may be called from any thread concurrently. A JSON set is parsed once, at
// Open, and its target stores are opened then too (no request is made before a read); a Parquet
// set's .zmetadata is read at Open, with the first record file of its first array (which checks
// it early and tells whether targets are remote), and other record files when first needed.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
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
  // The Parquet reference set in `directory` (a store of the set's directory, whose URL or path is
  // `location`), whose .zmetadata holds `zmetadata`.
  static Result<std::shared_ptr<ReferenceStore>> FromParquet(std::string_view location,
                                                             std::shared_ptr<Store> directory,
                                                             std::string_view zmetadata);

  // Decoded Parquet record files kept (the memory their references take), at least one.
  static constexpr uint64_t kRecordCacheBytes = uint64_t{256} << 20;
  // A Parquet set's record_size at most: a record's references are decoded whole.
  static constexpr uint64_t kMaxRecordSize = uint64_t{1} << 20;

  const std::string& url() const override { return url_; }
  Future<uint64_t> Read(std::string_view key, std::span<const ByteRange> ranges,
                        std::span<ByteBuffer> outs) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix) override;
  Result<DirectoryListing> ListDirectory(std::string_view prefix) override;
  Status Put(std::string_view key, std::span<const std::byte> value) override;
  Status Delete(std::string_view key) override;

  // True when some target is read over the network (see IsRemoteStore): for a Parquet set, when
  // its directory is remote or a target of a record file read so far is.
  bool has_remote_targets() const { return has_remote_targets_.load(); }
  bool is_parquet() const { return directory_ != nullptr; }
  // The keys of the set (of a Parquet set: its metadata keys, not the chunks of record files).
  size_t num_keys() const { return references_.size(); }
  // Lower-case hex SHA-256 of the reference file's bytes (of a Parquet set: of its .zmetadata,
  // which holds the metadata and record size, not of the record files): the reference set's
  // identity for provenance.
  const std::string& content_sha256() const { return content_sha256_; }

  // A file that references point into, and the store and key it is read through.
  struct Target {
    std::string url;  // as the set names it (relative paths resolved), for messages
    std::shared_ptr<Store> store;
    std::string key;
  };
  struct Reference {
    static constexpr uint32_t kInline = UINT32_MAX;
    static constexpr uint32_t kMissing = UINT32_MAX - 1;  // a Parquet set's null row
    uint32_t target = kInline;  // index into the targets, kInline or kMissing
    bool whole_file = false;    // [url]: all of the target
    uint64_t offset = 0;
    uint64_t length = 0;
    std::string data;  // inline bytes
  };

 private:
  friend class ReferenceSetParser;
  class TargetStores;
  // The references of one Parquet record file, by row, and the targets they index.
  struct Record {
    bool exists = false;  // false: the record file does not exist (its chunks are missing)
    std::vector<Reference> rows;
    std::vector<Target> targets;
    uint64_t memory_bytes = 0;
  };
  // A Parquet set's array: the number of chunks along each dimension.
  struct Field {
    std::vector<uint64_t> grid;
    uint64_t num_chunks = 0;
  };

  ReferenceStore() = default;
  // "reference file <location>" or "Parquet reference set <location>", for messages.
  std::string DescribeSet() const;
  static Result<std::shared_ptr<ReferenceStore>> OpenLocation(const std::string& location);
  static Result<std::shared_ptr<ReferenceStore>> OpenParquetDirectory(const std::string& location);
  Future<uint64_t> ReadReference(const std::string& full_key, const Reference& reference,
                                 const Target* target, std::span<const ByteRange> ranges,
                                 std::span<ByteBuffer> outs);
  // The field and chunk number of a Parquet set's chunk key, or nullopt for any other key.
  std::optional<std::pair<std::string_view, uint64_t>> ParquetChunk(std::string_view key) const;
  std::string RecordFile(std::string_view field, uint64_t record) const;
  Result<std::shared_ptr<const Record>> LoadRecord(std::string_view field, uint64_t record);
  Result<Record> DecodeRecord(std::string_view field, uint64_t record, std::string_view file_name,
                              std::span<const std::byte> bytes);
  // Appends the keys (and sizes) of the stored chunks of `field` to `keys`.
  Status ListChunks(const std::string& field, std::vector<KeyInfo>* keys);

  std::string url_;
  std::string location_;  // the reference file, for messages
  std::string prefix_;    // "<path>/" of a "#path" URL, or ""
  std::string content_sha256_;
  std::vector<Target> targets_;
  std::map<std::string, Reference, std::less<>> references_;
  std::shared_ptr<TargetStores> target_stores_;
  std::atomic<bool> has_remote_targets_ = false;

  // A Parquet set: its directory, record size and arrays, and the record files read.
  std::shared_ptr<Store> directory_;
  uint64_t record_size_ = 0;
  std::map<std::string, Field, std::less<>> fields_;
  std::mutex records_mu_;
  using RecordList = std::list<std::pair<std::string, std::shared_ptr<const Record>>>;
  RecordList records_;  // most recently used first
  std::unordered_map<std::string, RecordList::iterator> record_index_;
  uint64_t records_bytes_ = 0;
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
