// Bindings of the loader (zarrstream._zarrstream.Loader, LoaderOptions): batches leave C++ as
// DLPack-capable arrays over the batch's own buffers (no copy), which the Python package hands to
// torch.from_dlpack.
#pragma once

#include <nanobind/nanobind.h>

namespace zarrstream::python {

void RegisterLoaderBindings(nanobind::module_& m);

}  // namespace zarrstream::python
