#include "errors.h"

#include <new>

namespace nb = nanobind;

namespace zarrstream::python {

namespace {

const char* ExceptionClassName(const Status& status) {
  switch (status.code()) {
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
    case ErrorCode::kOutOfMemory:
      return "OutOfMemoryError";
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
      nb::object cls = errors.attr(ExceptionClassName(e.status()));
      // Messages quote metadata, which may hold bytes that are not UTF-8: escaped, so that
      // converting the message never raises an error of its own.
      const std::string& message = e.status().message();
      nb::object text = nb::steal(PyUnicode_DecodeUTF8(
          message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace"));
      PyErr_SetObject(cls.ptr(), text.ptr());
    } catch (const std::bad_alloc&) {
      // An allocation of the binding itself (a Status carries the size where the core allocates).
      nb::object errors = nb::module_::import_("zarrstream.errors");
      PyErr_SetString(errors.attr("OutOfMemoryError").ptr(),
                      "out of memory (an allocation failed in zarrstream)");
    }
  });
}

}  // namespace zarrstream::python
