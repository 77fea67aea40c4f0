// The rechunk and statistics jobs (tools/rechunk.h, tools/channel_stats.h) for the Python API
// (zarrstream/_jobs.py): whole jobs and their parts, run with the GIL released, Ctrl-C and
// progress callbacks handled on the calling thread.
#pragma once

#include <nanobind/nanobind.h>

namespace zarrstream::python {

void RegisterJobBindings(nanobind::module_& m);

}  // namespace zarrstream::python
