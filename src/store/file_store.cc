#include "store/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace zarrstream {

namespace {

std::string ErrnoMessage(int err) { return std::strerror(err); }

// Closes a file descriptor when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

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

std::string StripTrailingSlashes(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
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

Result<uint64_t> FileStore::ReadSync(std::string_view key, std::span<const ByteRange> ranges,
                                     std::span<ByteBuffer> outs) {
  ZS_RETURN_IF_ERROR(ValidateKey(key));
  if (ranges.size() != outs.size()) return InternalError("FileStore::Read: ranges/outs mismatch");
  std::string path = PathOf(key);
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return NotFoundError("no such key: " + path);
    return StorageError("opening " + path + ": " + ErrnoMessage(errno));
  }
  uint64_t size = 0;
  bool need_size = false;
  for (const ByteRange& r : ranges) need_size |= r.kind != ByteRange::Kind::kBounded;
  if (need_size || !ranges.empty()) {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
      return StorageError("stat " + path + ": " + ErrnoMessage(errno));
    if (S_ISDIR(st.st_mode)) return NotFoundError("no such key (a directory): " + path);
    size = static_cast<uint64_t>(st.st_size);
  }
  uint64_t total = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    uint64_t begin = 0, end = 0;
    ZS_RETURN_IF_ERROR_CTX(ResolveByteRange(ranges[i], size, &begin, &end), path);
    outs[i].Resize(end - begin);
    ZS_RETURN_IF_ERROR(PreadFully(fd.get(), outs[i].data(), end - begin, begin, path));
    total += end - begin;
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
    std::string rel = std::filesystem::relative(it->path(), root_, ec).generic_string();
    if (ec) continue;
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
  std::filesystem::path path = PathOf(key);
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path.string() + ".zstmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter.fetch_add(1));
  int raw_fd = -1;
  // A concurrent Delete may remove the directory between its creation and the open (Delete
  // prunes directories it empties): create it again then.
  for (int attempt = 0; attempt < 8 && raw_fd < 0; ++attempt) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return StorageError("creating " + path.parent_path().string() + ": " + ec.message());
    raw_fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (raw_fd < 0 && errno != ENOENT) break;
  }
  if (raw_fd < 0) return StorageError("creating " + tmp + ": " + ErrnoMessage(errno));
  FileDescriptor fd(raw_fd);
  const std::byte* p = value.data();
  size_t left = value.size();
  while (left > 0) {
    ssize_t n = ::write(fd.get(), p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = StorageError("writing " + tmp + ": " + ErrnoMessage(errno));
      ::unlink(tmp.c_str());
      return s;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s =
        StorageError("renaming " + tmp + " to " + path.string() + ": " + ErrnoMessage(errno));
    ::unlink(tmp.c_str());
    return s;
  }
  return Status::Ok();
}

Status FileStore::Delete(std::string_view key) {
  ZS_RETURN_IF_ERROR(ValidateKey(key));
  std::filesystem::path path = PathOf(key);
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return StorageError("removing " + path.string() + ": " + ErrnoMessage(errno));
  }
  // Keys have no directories: remove the ones this emptied, up to the root, as object stores
  // would show it. rmdir fails harmlessly on a directory that is not empty.
  std::filesystem::path dir = path.parent_path();
  for (size_t depth = std::count(key.begin(), key.end(), '/'); depth > 0; --depth) {
    if (::rmdir(dir.c_str()) != 0) break;
    dir = dir.parent_path();
  }
  return Status::Ok();
}

}  // namespace zarrstream
