#include "zarrstream/status.h"

namespace zarrstream {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "OK";
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kMetadata:
      return "Metadata";
    case ErrorCode::kUnsupported:
      return "Unsupported";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kCorruptChunk:
      return "CorruptChunk";
    case ErrorCode::kStorage:
      return "Storage";
    case ErrorCode::kConfig:
      return "Config";
    case ErrorCode::kCuda:
      return "Cuda";
    case ErrorCode::kOutOfMemory:
      return "OutOfMemory";
    case ErrorCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

Status Status::WithContext(std::string_view context) const& {
  Status copy = *this;
  return std::move(copy).WithContext(context);
}

Status Status::WithContext(std::string_view context) && {
  if (ok() || context.empty()) return std::move(*this);
  std::string m;
  m.reserve(context.size() + 2 + message_.size());
  m.append(context).append(": ").append(message_);
  message_ = std::move(m);
  return std::move(*this);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

}  // namespace zarrstream
