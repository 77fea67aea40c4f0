// What zarrstream finds on this machine, for `zarrstream doctor`: the GPU (through the CUDA driver,
// loaded at run time), GPU decoding, GPUDirect Storage, the CPU and the versions of the libraries
// the codecs and stores use. Thread-safe; loads the CUDA driver on first use.
#pragma once

#include <nlohmann/json.hpp>

namespace zarrstream::tools {

// {"zarrstream_version", "cuda_compiled", "gpu" (null, or name / memory_bytes / driver_cuda_version
// / devices), "gpu_unavailable_reason", "nvcomp_version", "gpu_codecs", "gds", "cpu" (model,
// cores, features), "memory_bytes", "libraries" (name → version)}.
nlohmann::json EnvironmentReport();

}  // namespace zarrstream::tools
