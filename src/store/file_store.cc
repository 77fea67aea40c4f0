#include "store/file_store.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

namespace zarrstream {

namespace {

std::string ErrnoMessage(int err) { return std::strerror(err); }

// Closes a file descriptor when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  // Closes now and reports the result: some file systems (NFS, quotas) report a full disk only
  // when a written file is closed.
  int Close() { return ::close(std::exchange(fd_, -1)); }

 private:
  int fd_;
};

Status PreadFully(int fd, std::byte* dst, uint64_t length, uint64_t offset,
                  const std::string& path) {
  while (length > 0) {
    ssize_t n = ::pread(fd, dst, length, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return StorageError("reading " + path + ": " + ErrnoMessage(errno));
    }
    if (n == 0) return CorruptChunkError("reading " + path + ": file ended early (truncated?)");
    dst += n;
    length -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

// What a file that is not a regular file or a directory is, for messages.
const char* FileTypeName(mode_t mode) {
  if (S_ISFIFO(mode)) return "a named pipe";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "a special file";
}

Status NotRegularFileError(std::string_view key, const std::string& path, mode_t mode) {
  std::string message = "refusing to read key '";
  message += key;
  message += "' at ";
  message += path;
  message += ": it is ";
  message += FileTypeName(mode);
  message += ", not a regular file";
  return StorageError(std::move(message));
}

std::string StripTrailingSlashes(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// The '/'-separated segments of a validated key.
std::vector<std::string_view> Segments(std::string_view key) {
  std::vector<std::string_view> out;
  for (size_t start = 0; start <= key.size();) {
    size_t slash = key.find('/', start);
    if (slash == std::string_view::npos) slash = key.size();
    out.push_back(key.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

// Where a write's walk to the parent directory of a key ended.
enum class WalkEnd { kOpened, kMissing };

// Opens the directories from the root down to the parent of `key` (a validated key), each one
// with O_NOFOLLOW relative to the one above, so no symbolic link below the root is followed: a
// link planted in the store (a chunk directory pointing elsewhere) cannot redirect a write or a
// removal outside it. The root itself is the caller's path and may be a link. With `create`,
// missing directories (the root included) are made, and kMissing means one was removed again
// meanwhile (walk again); without, a missing one ends the walk with kMissing. `dirs` receives the
// root and every directory opened, in order.
Result<WalkEnd> OpenParentDirectories(const std::string& root, std::string_view key, bool create,
                                      std::vector<FileDescriptor>* dirs) {
  dirs->clear();
  FileDescriptor top(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (top.get() < 0 && errno == ENOENT && create) {
    std::error_code ec;
    std::filesystem::create_directories(root, ec);
    if (ec) return StorageError("creating " + root + ": " + ec.message());
    top = FileDescriptor(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  if (top.get() < 0) {
    if (errno == ENOENT) return WalkEnd::kMissing;
    return StorageError("opening " + root + ": " + ErrnoMessage(errno));
  }
  dirs->push_back(std::move(top));
  const std::vector<std::string_view> segments = Segments(key);
  std::string path = root;
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    const std::string name(segments[i]);
    path += '/';
    path += name;
    const int parent = dirs->back().get();
    constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::openat(parent, name.c_str(), kFlags);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(parent, name.c_str(), 0755) != 0 && errno != EEXIST) {
        // The parent was removed under us (a concurrent Delete prunes emptied directories).
        if (errno == ENOENT) return WalkEnd::kMissing;
        return StorageError("creating " + path + ": " + ErrnoMessage(errno));
      }
      fd = ::openat(parent, name.c_str(), kFlags);
    }
    if (fd < 0) {
      const int err = errno;
      struct stat st {};
      if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        std::string message = "refusing to write ";
        message += root;
        message += "/";
        message += key;
        message += ": ";
        message += path;
        message += " is a symbolic link, and writes never follow links below the store root ";
        message += root;
        return StorageError(std::move(message));
      }
      if (err == ENOENT) return WalkEnd::kMissing;  // with `create`: removed since made
      return StorageError("opening " + path + ": " + ErrnoMessage(err));
    }
    dirs->push_back(FileDescriptor(fd));
  }
  return WalkEnd::kOpened;
}

}  // namespace

FileStore::FileStore(std::string root)
    : root_(StripTrailingSlashes(std::move(root))), url_("file://" + root_) {
  if (!root_.empty() && root_.front() != '/') {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(root_, ec);
    if (!ec) url_ = "file://" + absolute.lexically_normal().string();
  }
}

std::string FileStore::PathOf(std::string_view key) const {
  std::string path = root_;
  path += '/';
  path.append(key);
  return path;
}

Future<uint64_t> FileStore::Read(std::string_view key, std::span<const ByteRange> ranges,
                                 std::span<ByteBuffer> outs) {
  return Future<uint64_t>::Ready(ReadSync(key, ranges, outs));
}

namespace {

int64_t SteadyNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The calling thread's voluntary context switches so far: it blocked (on I/O, or a lock).
long VoluntaryWaits() {
  struct rusage usage {};
  return ::getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_nvcsw : 0;
}

}  // namespace

void FileStore::NoteReadFromDisk() {
  last_read_from_disk_ns_.store(SteadyNanoseconds(), std::memory_order_relaxed);
}

bool FileStore::WillRead(std::string_view key, std::span<const ByteRange> ranges) {
  // ZARRSTREAM_READ_HINTS=0 turns them off (to compare, or where the disk is better left alone).
  static const bool enabled = [] {
    const char* value = std::getenv("ZARRSTREAM_READ_HINTS");
    return value == nullptr || std::string_view(value) != "0";
  }();
  if (!enabled) return false;
  const bool recent =
      SteadyNanoseconds() - last_read_from_disk_ns_.load(std::memory_order_relaxed) <=
      static_cast<int64_t>(kHintSeconds * 1e9);
  if (!ValidateKey(key).ok()) return recent;
  const std::string path = PathOf(key);
  // Non-blocking: a named pipe opens at once, and is then not a regular file.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return recent;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (!recent) {
    // No read has come from the disk lately, but this may be the first (a new process, a new
    // epoch of a dataset larger than memory): whether the value's first page is in the page cache,
    // asked with a read that fails rather than wait for the disk.
    uint64_t begin = 0, end = 0;
    if (ranges.empty() || !ResolveByteRange(ranges[0], size, &begin, &end).ok() || begin == end) {
      return false;
    }
    std::array<std::byte, 4096> page;
    iovec into{page.data(), static_cast<size_t>(std::min<uint64_t>(end - begin, page.size()))};
    if (::preadv2(fd.get(), &into, 1, static_cast<off_t>(begin), RWF_NOWAIT) >= 0 ||
        errno != EAGAIN) {
      return false;
    }
    NoteReadFromDisk();
  }
  for (const ByteRange& range : ranges) {
    uint64_t begin = 0, end = 0;
    if (!ResolveByteRange(range, size, &begin, &end).ok()) continue;
    (void)::posix_fadvise(fd.get(), static_cast<off_t>(begin), static_cast<off_t>(end - begin),
                          POSIX_FADV_WILLNEED);
  }
  return true;
}

Result<uint64_t> FileStore::ReadSync(std::string_view key, std::span<const ByteRange> ranges,
                                     std::span<ByteBuffer> outs) {
  ZS_RETURN_IF_ERROR(ValidateKey(key));
  if (ranges.size() != outs.size()) return InternalError("FileStore::Read: ranges/outs mismatch");
  std::string path = PathOf(key);
  // Only regular files are values. Opening anything else may block for ever (a named pipe waits
  // for a writer) or act on a device, so the type is checked before opening, and again on the
  // opened file (it may have been replaced in between), which is opened non-blocking for that.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return NotFoundError("no such key: " + path);
    return StorageError("stat " + path + ": " + ErrnoMessage(errno));
  }
  if (S_ISDIR(st.st_mode)) return NotFoundError("no such key (a directory): " + path);
  if (!S_ISREG(st.st_mode)) return NotRegularFileError(key, path, st.st_mode);
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return NotFoundError("no such key: " + path);
    return StorageError("opening " + path + ": " + ErrnoMessage(errno));
  }
  if (::fstat(fd.get(), &st) != 0) return StorageError("stat " + path + ": " + ErrnoMessage(errno));
  if (S_ISDIR(st.st_mode)) return NotFoundError("no such key (a directory): " + path);
  if (!S_ISREG(st.st_mode)) return NotRegularFileError(key, path, st.st_mode);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  uint64_t total = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    uint64_t begin = 0, end = 0;
    ZS_RETURN_IF_ERROR_CTX(ResolveByteRange(ranges[i], size, &begin, &end), path);
    const uint64_t length = end - begin;
    ByteBuffer& out = outs[i];
    if (length > out.capacity()) {
      // What it holds is overwritten: growing need not copy it. A buffer read into before (a
      // worker's scratch, reused for chunk after chunk) grows with an eighth to spare, so chunks
      // of similar sizes reallocate it a few times, not at each new largest one (each time with
      // fresh pages to fault in).
      const uint64_t capacity = out.capacity() > 0 ? length + length / 8 : length;
      out.Clear();
      out.Reserve(capacity);
    }
    out.Resize(length);
    const int64_t start = SteadyNanoseconds();
    const long waits = VoluntaryWaits();
    ZS_RETURN_IF_ERROR(PreadFully(fd.get(), out.data(), length, begin, path));
    // The page cache delivers several GB/s to a thread: a read 100 us slower than 2 GB/s during
    // which the thread waited (not one it was preempted in, on a busy machine) waited for the
    // disk.
    if (SteadyNanoseconds() - start > 100'000 + static_cast<int64_t>(length / 2) &&
        VoluntaryWaits() > waits) {
      NoteReadFromDisk();
    }
    total += length;
  }
  return total;
}

Result<std::vector<KeyInfo>> FileStore::List(std::string_view prefix) {
  std::vector<KeyInfo> keys;
  if (!prefix.empty()) ZS_RETURN_IF_ERROR(ValidateKey(prefix));
  std::filesystem::path base =
      prefix.empty() ? std::filesystem::path(root_) : std::filesystem::path(PathOf(prefix));
  std::error_code ec;
  if (!std::filesystem::is_directory(base, ec)) return keys;
  std::filesystem::recursive_directory_iterator it(base, ec), end;
  if (ec) return StorageError("listing " + base.string() + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return StorageError("listing " + base.string() + ": " + ec.message());
    if (!it->is_regular_file(ec)) continue;
    // Lexically: relative() would resolve a link to its target, outside the store, and the key
    // would be the target's path ("../elsewhere") rather than the link's.
    std::string rel = it->path().lexically_relative(root_).generic_string();
    if (rel.empty()) continue;
    keys.push_back({std::move(rel), static_cast<uint64_t>(it->file_size(ec))});
  }
  return keys;
}

Result<DirectoryListing> FileStore::ListDirectory(std::string_view prefix) {
  DirectoryListing listing;
  if (!prefix.empty()) ZS_RETURN_IF_ERROR(ValidateKey(prefix));
  std::filesystem::path base =
      prefix.empty() ? std::filesystem::path(root_) : std::filesystem::path(PathOf(prefix));
  std::error_code ec;
  if (!std::filesystem::is_directory(base, ec)) return listing;
  for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
    std::string name = entry.path().filename().string();
    std::string key = JoinKey(prefix, name);
    std::error_code entry_ec;
    if (entry.is_directory(entry_ec)) {
      listing.prefixes.push_back(std::move(key));
    } else if (entry.is_regular_file(entry_ec)) {
      listing.keys.push_back({std::move(key), static_cast<uint64_t>(entry.file_size(entry_ec))});
    }
  }
  if (ec) return StorageError("listing " + base.string() + ": " + ec.message());
  return listing;
}

Status FileStore::Put(std::string_view key, std::span<const std::byte> value) {
  ZS_RETURN_IF_ERROR(ValidateKey(key));
  const std::string path = PathOf(key);
  const std::string leaf(Segments(key).back());
  static std::atomic<uint64_t> counter{0};
  const std::string tmp_name = leaf + std::string(kFileStoreTemporaryMarker) +
                               std::to_string(::getpid()) + "." +
                               std::to_string(counter.fetch_add(1));
  const std::string tmp = path.substr(0, path.size() - leaf.size()) + tmp_name;
  std::vector<FileDescriptor> dirs;
  FileDescriptor fd;
  int open_error = 0;
  // A concurrent Delete may remove a directory between its creation and the open (Delete prunes
  // directories it empties): walk again then, yielding to the deleter. Deletes of keys beside this
  // one can win that race several times in a row on a busy machine (8 attempts were not always
  // enough with 4 threads on 2 cores); once the temporary file exists its directory stays.
  constexpr int kAttempts = 256;
  for (int attempt = 0; attempt < kAttempts && fd.get() < 0; ++attempt) {
    if (attempt > 0) std::this_thread::yield();
    ZS_ASSIGN_OR_RETURN(WalkEnd end, OpenParentDirectories(root_, key, /*create=*/true, &dirs));
    if (end == WalkEnd::kMissing) {
      open_error = ENOENT;
      continue;
    }
    fd = FileDescriptor(::openat(dirs.back().get(), tmp_name.c_str(),
                                 O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
    open_error = fd.get() < 0 ? errno : 0;
    if (open_error != 0 && open_error != ENOENT) break;
  }
  if (fd.get() < 0) return StorageError("creating " + tmp + ": " + ErrnoMessage(open_error));
  const int dir = dirs.back().get();
  auto fail = [&](int err, const std::string& what) {
    Status s = StorageError(what + ": " + ErrnoMessage(err));
    ::unlinkat(dir, tmp_name.c_str(), 0);
    return s;
  };
  const std::byte* p = value.data();
  size_t left = value.size();
  while (left > 0) {
    ssize_t n = ::write(fd.get(), p, left);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      std::string what = "writing ";
      what += path;
      what += " (through ";
      what += tmp;
      what += ")";
      return fail(err, what);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (fd.Close() != 0) {
    const int err = errno;
    return fail(err, "writing " + path + " (closing " + tmp + ")");
  }
  // renameat replaces the final name itself, never what a link there points to.
  if (::renameat(dir, tmp_name.c_str(), dir, leaf.c_str()) != 0) {
    const int err = errno;
    return fail(err, "renaming " + tmp + " to " + path);
  }
  return Status::Ok();
}

Status FileStore::Delete(std::string_view key) {
  ZS_RETURN_IF_ERROR(ValidateKey(key));
  const std::string path = PathOf(key);
  const std::vector<std::string_view> segments = Segments(key);
  std::vector<FileDescriptor> dirs;
  ZS_ASSIGN_OR_RETURN(WalkEnd end, OpenParentDirectories(root_, key, /*create=*/false, &dirs));
  if (end == WalkEnd::kMissing) return Status::Ok();
  const std::string leaf(segments.back());
  if (::unlinkat(dirs.back().get(), leaf.c_str(), 0) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return StorageError("removing " + path + ": " + ErrnoMessage(errno));
  }
  // Keys have no directories: remove the ones this emptied, up to the root, as object stores
  // would show it. Removing a directory that is not empty fails harmlessly.
  for (size_t i = dirs.size() - 1; i > 0; --i) {
    const std::string name(segments[i - 1]);
    if (::unlinkat(dirs[i - 1].get(), name.c_str(), AT_REMOVEDIR) != 0) break;
  }
  return Status::Ok();
}

}  // namespace zarrstream
