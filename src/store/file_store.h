// FileStore: a store over a local directory. Reads are positioned reads (pread) completed inline on
// the calling thread; Put writes a temporary file ("<key>.zstmp.<pid>.<n>", removed again when the
// write fails) and renames it into place, so readers never see a partial value.
//
// Symbolic links: reads follow them (a dataset assembled from links reads as usual). Writes and
// removals never do below the root: Put and Delete open each directory of the key with O_NOFOLLOW
// relative to the one above and fail with a kStorage error naming the link, so a link planted in
// the store cannot redirect a write outside it; a link at the key itself is replaced, not followed.
// The root path itself may be a link.
//
// Special files: only regular files are values. A read of a named pipe, socket or device at a key
// is a kStorage error naming the key (never a read that blocks for ever: the type is checked before
// opening, and on the file opened non-blocking); listings leave them out.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "store/store.h"

namespace zarrstream {

// In the name of every temporary file FileStore::Put writes ("<key>.zstmp.<pid>.<n>"): what a
// cleanup of an interrupted writer's leftovers looks for.
inline constexpr std::string_view kFileStoreTemporaryMarker = ".zstmp.";

class FileStore final : public Store {
 public:
  // `root` is a local directory path (it need not exist yet for writing).
  explicit FileStore(std::string root);

  const std::string& url() const override { return url_; }
  Future<uint64_t> Read(std::string_view key, std::span<const ByteRange> ranges,
                        std::span<ByteBuffer> outs) override;
  // While reads come from the disk (one did within kHintSeconds: its thread blocked in it and it
  // took longer than the page cache takes; or the value's first page is not in the page cache):
  // posix_fadvise(WILLNEED) of the ranges, which has the kernel read them ahead of the reads.
  // Otherwise nothing (false): a page-cache hit gains nothing from it. ZARRSTREAM_READ_HINTS=0 in
  // the environment turns the hints off.
  bool WillRead(std::string_view key, std::span<const ByteRange> ranges) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix) override;
  Result<DirectoryListing> ListDirectory(std::string_view prefix) override;
  Status Put(std::string_view key, std::span<const std::byte> value) override;
  Status Delete(std::string_view key) override;

  const std::string& root() const { return root_; }

  // How long after a read from the disk hints are acted on.
  static constexpr double kHintSeconds = 10;
  // As if a read had just come from the disk.
  void NoteReadFromDiskForTesting() { NoteReadFromDisk(); }

 private:
  void NoteReadFromDisk();
  Result<uint64_t> ReadSync(std::string_view key, std::span<const ByteRange> ranges,
                            std::span<ByteBuffer> outs);
  std::string PathOf(std::string_view key) const;

  std::string root_;  // without trailing '/'
  std::string url_;
  // steady_clock nanoseconds of the last read slower than the page cache delivers.
  std::atomic<int64_t> last_read_from_disk_ns_{std::numeric_limits<int64_t>::min() / 2};
};

}  // namespace zarrstream
