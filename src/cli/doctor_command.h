// `zarrstream doctor [URL] [--json]`: what zarrstream finds on this machine
// (tools/environment_report.h): the GPU and its driver, GPU decoding, GPUDirect Storage, the CPU,
// library versions; given a dataset, whether its layout suits training reads here
// (tools/store_advice.h).
#pragma once

#include <string>

namespace zarrstream::cli {

// Prints the report (JSON with `json`: {"environment", "store"} when a URL is given, else the
// environment alone); returns the process exit code (1 when the dataset cannot be opened).
int RunDoctor(const std::string& url, bool json);

}  // namespace zarrstream::cli
