#include "errors.h"

namespace nb = nanobind;

namespace zarrstream::python {

namespace {

const char* ExceptionClassName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "InvalidArgumentError";
    case ErrorCode::kMetadata:
      return "MetadataError";
    case ErrorCode::kUnsupported:
      return "UnsupportedError";
    case ErrorCode::kNotFound:
      return "NotFoundError";
    case ErrorCode::kCorruptChunk:
      return "CorruptChunkError";
    case ErrorCode::kStorage:
      return "StorageError";
    case ErrorCode::kConfig:
      return "ConfigError";
    case ErrorCode::kCuda:
      return "CudaError";
    case ErrorCode::kOk:
    case ErrorCode::kInternal:
      break;
  }
  return "InternalError";
}

}  // namespace

void RegisterErrorTranslator(nb::module_&) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object errors = nb::module_::import_("zarrstream.errors");
      nb::object cls = errors.attr(ExceptionClassName(e.status().code()));
      PyErr_SetString(cls.ptr(), e.status().message().c_str());
    }
  });
}

}  // namespace zarrstream::python
