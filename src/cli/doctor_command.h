// `zarrstream doctor [--json]`: what zarrstream finds on this machine (tools/environment_report.h):
// the GPU and its driver, GPU decoding, GPUDirect Storage, the CPU, library versions.
#pragma once

namespace zarrstream::cli {

// Prints the report (JSON with `json`); returns the process exit code.
int RunDoctor(bool json);

}  // namespace zarrstream::cli
