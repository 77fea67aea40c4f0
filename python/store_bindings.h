// Bindings of the byte-level Store (zarrstream._zarrstream.open_store): the store conformance
// tests against real servers, and request metrics for the loader's stats.
#pragma once

#include <nanobind/nanobind.h>

namespace zarrstream::python {

void RegisterStoreBindings(nanobind::module_& m);

}  // namespace zarrstream::python
