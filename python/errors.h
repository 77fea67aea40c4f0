// The one place C++ errors become Python exceptions: a Status travels as StatusError, and the
// translator registered by RegisterErrorTranslator raises the matching zarrstream.errors class.
#pragma once

#include <nanobind/nanobind.h>

#include <exception>
#include <string>

#include "zarrstream/status.h"

namespace zarrstream::python {

class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

void RegisterErrorTranslator(nanobind::module_& m);

// Throws StatusError for an error status.
inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) throw StatusError(result.status());
  return std::move(result).value();
}

}  // namespace zarrstream::python
