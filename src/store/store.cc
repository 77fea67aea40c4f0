#include "store/store.h"

#include <optional>

namespace zarrstream {

std::string ByteRange::ToString() const {
  switch (kind) {
    case Kind::kFromOffset:
      return "bytes=" + std::to_string(offset) + "-";
    case Kind::kBounded:
      return "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1);
    case Kind::kSuffix:
      return "bytes=-" + std::to_string(length);
  }
  return "?";
}

Status ResolveByteRange(const ByteRange& range, uint64_t size, uint64_t* begin, uint64_t* end) {
  switch (range.kind) {
    case ByteRange::Kind::kFromOffset:
      if (range.offset > size) break;
      *begin = range.offset;
      *end = size;
      return Status::Ok();
    case ByteRange::Kind::kBounded:
      if (range.offset > size || range.length > size - range.offset) break;
      *begin = range.offset;
      *end = range.offset + range.length;
      return Status::Ok();
    case ByteRange::Kind::kSuffix:
      if (range.length > size) break;
      *begin = size - range.length;
      *end = size;
      return Status::Ok();
  }
  return CorruptChunkError("byte range " + range.ToString() + " lies outside the stored value of " +
                           std::to_string(size) + " bytes");
}

Status Store::ReadInto(std::string_view key, ByteRange range, ByteBuffer* out) {
  return Read(key, std::span<const ByteRange>(&range, 1), std::span<ByteBuffer>(out, 1))
      .Wait()
      .status();
}

Result<ByteBuffer> Store::ReadAll(std::string_view key) {
  ByteBuffer out;
  ZS_RETURN_IF_ERROR(ReadInto(key, ByteRange::Full(), &out));
  return out;
}

Result<std::optional<ByteBuffer>> Store::ReadIfExists(std::string_view key) {
  ByteBuffer out;
  Status s = ReadInto(key, ByteRange::Full(), &out);
  if (s.code() == ErrorCode::kNotFound) return std::optional<ByteBuffer>();
  ZS_RETURN_IF_ERROR(s);
  return std::optional<ByteBuffer>(std::move(out));
}

Status ValidateKey(std::string_view key) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("invalid store key '" + EscapeNul(key) + "': " + std::string(why));
  };
  if (key.empty()) return bad("empty");
  if (key.front() == '/') return bad("absolute paths are not allowed");
  if (key.find('\0') != std::string_view::npos) return bad("contains a NUL byte");
  if (key.find('\\') != std::string_view::npos) return bad("contains a backslash");
  size_t start = 0;
  while (start <= key.size()) {
    size_t slash = key.find('/', start);
    if (slash == std::string_view::npos) slash = key.size();
    std::string_view segment = key.substr(start, slash - start);
    if (segment.empty()) return bad("empty path segment");
    if (segment == "." || segment == "..") return bad("'.' and '..' segments are not allowed");
    start = slash + 1;
  }
  return Status::Ok();
}

std::string EscapeNul(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\0') {
      out += "\\0";
    } else {
      out += c;
    }
  }
  return out;
}

std::string JoinKey(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  if (key.empty()) return std::string(prefix);
  std::string out(prefix);
  if (out.back() != '/') out += '/';
  out.append(key);
  return out;
}

}  // namespace zarrstream
