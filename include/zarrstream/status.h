// Errors as values: Status and Result<T>.
//
// Every fallible operation in zarrstream returns a Status or a Result<T>. Each layer adds context
// as an error travels up ("reading chunk c/3/0 of array 'temperature' in file:///data/era5.zarr:
// ..."), so the message that reaches the user names the store, the array and the chunk. Exceptions
// are made in exactly one place: the Python boundary (python/errors.cc).
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace zarrstream {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // the caller asked for something impossible (bad slice, bad option)
  kMetadata,         // malformed or inconsistent zarr.json / .zarray / .zmetadata
  kUnsupported,      // well-formed but not supported (unknown codec, data type, extension)
  kNotFound,         // a key, array or group that does not exist
  kCorruptChunk,     // stored bytes that do not decode: truncated, bad frame, checksum mismatch
  kStorage,          // I/O failure of the underlying store
  kConfig,           // invalid configuration of a zarrstream component
  kCuda,             // a CUDA driver or library call failed (the message names the call and code)
  kOutOfMemory,      // an allocation failed, or a size is more than this machine holds
  kInternal,         // a bug in zarrstream
};

std::string_view ErrorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns this status with `context` prepended ("context: message"); OK stays OK.
  Status WithContext(std::string_view context) const&;
  Status WithContext(std::string_view context) &&;

  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) {
  return {ErrorCode::kInvalidArgument, std::move(m)};
}
inline Status MetadataError(std::string m) { return {ErrorCode::kMetadata, std::move(m)}; }
inline Status UnsupportedError(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status CorruptChunkError(std::string m) { return {ErrorCode::kCorruptChunk, std::move(m)}; }
inline Status StorageError(std::string m) { return {ErrorCode::kStorage, std::move(m)}; }
inline Status ConfigError(std::string m) { return {ErrorCode::kConfig, std::move(m)}; }
inline Status CudaError(std::string m) { return {ErrorCode::kCuda, std::move(m)}; }
inline Status OutOfMemoryError(std::string m) { return {ErrorCode::kOutOfMemory, std::move(m)}; }
inline Status InternalError(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

// A value or the Status explaining why there is none. Accessing the value of an error Result is a
// programming error (checked in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : storage_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : storage_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(storage_).ok() && "Result constructed from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(storage_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(storage_); }

  T& value() & { return std::get<T>(storage_); }
  const T& value() const& { return std::get<T>(storage_); }
  T&& value() && { return std::get<T>(std::move(storage_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> storage_;
};

namespace internal {
inline Status AsStatus(Status s) { return s; }
template <typename T>
Status AsStatus(const Result<T>& r) {
  return r.status();
}
}  // namespace internal

}  // namespace zarrstream

#define ZS_CONCAT_INNER(a, b) a##b
#define ZS_CONCAT(a, b) ZS_CONCAT_INNER(a, b)

// Returns from the current function if `expr` (a Status or Result) is an error.
#define ZS_RETURN_IF_ERROR(expr)                                              \
  do {                                                                        \
    ::zarrstream::Status zs_status_ = ::zarrstream::internal::AsStatus(expr); \
    if (!zs_status_.ok()) return zs_status_;                                  \
  } while (false)

// Like ZS_RETURN_IF_ERROR, adding `context` to the error message.
#define ZS_RETURN_IF_ERROR_CTX(expr, context)                                 \
  do {                                                                        \
    ::zarrstream::Status zs_status_ = ::zarrstream::internal::AsStatus(expr); \
    if (!zs_status_.ok()) return std::move(zs_status_).WithContext(context);  \
  } while (false)

// `lhs` may be a declaration (`auto x`) and `tmp` is a name being declared, so neither can be
// parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define ZS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

// `lhs = value of expr`, or return the error of `expr`.
#define ZS_ASSIGN_OR_RETURN(lhs, expr) \
  ZS_ASSIGN_OR_RETURN_IMPL(ZS_CONCAT(zs_result_, __LINE__), lhs, expr)

// NOLINTBEGIN(bugprone-macro-parentheses): as for ZS_ASSIGN_OR_RETURN_IMPL.
#define ZS_ASSIGN_OR_RETURN_CTX_IMPL(tmp, lhs, expr, context) \
  auto tmp = (expr);                                          \
  if (!tmp.ok()) return tmp.status().WithContext(context);    \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

#define ZS_ASSIGN_OR_RETURN_CTX(lhs, expr, context) \
  ZS_ASSIGN_OR_RETURN_CTX_IMPL(ZS_CONCAT(zs_result_, __LINE__), lhs, expr, context)
