// Store: the byte-level key/value interface every backend implements (file, memory; http, s3 and
// gcs register themselves the same way). A store knows keys and bytes, nothing of arrays.
//
// Keys are '/'-separated relative paths ("temperature/c/0/3/1"). ValidateKey rejects keys that
// could escape the store root; every backend calls it before touching storage.
//
// Threads: every method may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/byte_buffer.h"
#include "util/future.h"
#include "zarrstream/status.h"

namespace zarrstream {

// A byte range of a stored value: [offset, offset + length), everything from `offset` on, or the
// last `length` bytes.
struct ByteRange {
  enum class Kind : uint8_t { kFromOffset, kBounded, kSuffix };
  Kind kind = Kind::kFromOffset;
  uint64_t offset = 0;
  uint64_t length = 0;

  static ByteRange Full() { return {}; }
  static ByteRange FromOffset(uint64_t offset) { return {Kind::kFromOffset, offset, 0}; }
  static ByteRange Bounded(uint64_t offset, uint64_t length) {
    return {Kind::kBounded, offset, length};
  }
  static ByteRange Suffix(uint64_t length) { return {Kind::kSuffix, 0, length}; }

  bool is_full() const { return kind == Kind::kFromOffset && offset == 0; }
  std::string ToString() const;
  bool operator==(const ByteRange&) const = default;
};

// Resolves a range against a value of `size` bytes into [begin, end). Fails when the range reaches
// past the end of the value (a stored object shorter than its index says: a corrupt store).
Status ResolveByteRange(const ByteRange& range, uint64_t size, uint64_t* begin, uint64_t* end);

struct KeyInfo {
  std::string key;
  uint64_t size = 0;
};

// The direct children of a prefix: keys stored right under it and the names of sub-prefixes.
struct DirectoryListing {
  std::vector<KeyInfo> keys;          // full keys
  std::vector<std::string> prefixes;  // full prefixes, without trailing '/'
};

class Store {
 public:
  virtual ~Store() = default;

  // The store's root as a URL, safe to print: it never contains credentials.
  virtual const std::string& url() const = 0;

  // Reads `ranges` of the value stored at `key` into `outs` (same length; outs[i] is resized to the
  // bytes of ranges[i] and its memory reused when large enough). Resolves to the total number of
  // bytes read, kNotFound when `key` does not exist, or another error.
  //
  // Lifetime: `key`, `ranges` and `outs` must stay valid until the future resolves. Backends may
  // complete the read inline on the calling thread (the file store does: a positioned read of a
  // local file is cheap, and callers already spread chunks over threads) or on their own I/O
  // threads.
  virtual Future<uint64_t> Read(std::string_view key, std::span<const ByteRange> ranges,
                                std::span<ByteBuffer> outs) = 0;

  // A hint that `ranges` of the value at `key` will be read soon: a store may start fetching them
  // (the file store asks the kernel to read them into the page cache while its reads come from
  // the disk). Changes no result; errors (a missing key) are left to the read. Returns false where
  // hints do nothing now, so that a caller may stop giving them for a while. Thread-safe; returns
  // without waiting for the data.
  virtual bool WillRead(std::string_view key, std::span<const ByteRange> ranges) {
    (void)key;
    (void)ranges;
    return false;
  }

  // Every key under `prefix` ("" for all), recursively, with its size; in no particular order.
  virtual Result<std::vector<KeyInfo>> List(std::string_view prefix) = 0;

  // The keys and sub-prefixes directly under `prefix`.
  virtual Result<DirectoryListing> ListDirectory(std::string_view prefix) = 0;

  // Stores `value` at `key`, replacing any value there. Readers never see a partial value.
  virtual Status Put(std::string_view key, std::span<const std::byte> value) = 0;

  // Removes the value at `key`. Removing a key that does not exist succeeds.
  virtual Status Delete(std::string_view key) = 0;

  // Convenience wrappers over Read: blocking, one range.
  Status ReadInto(std::string_view key, ByteRange range, ByteBuffer* out);
  Result<ByteBuffer> ReadAll(std::string_view key);
  // Like ReadAll, but a missing key is an empty optional rather than an error.
  Result<std::optional<ByteBuffer>> ReadIfExists(std::string_view key);
};

// Checks that `key` is a relative '/'-separated path that stays inside the store: not empty, no
// leading '/', no "." or ".." or empty segments, no NUL or backslash.
Status ValidateKey(std::string_view key);

// `text` with each NUL byte written as "\0", for messages.
std::string EscapeNul(std::string_view text);

// Joins a prefix and a relative key with '/' ("" prefix: the key itself).
std::string JoinKey(std::string_view prefix, std::string_view key);

}  // namespace zarrstream
