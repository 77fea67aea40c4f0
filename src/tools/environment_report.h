// What zarrstream finds on this machine, for `zarrstream doctor`: the GPU (through the CUDA driver,
// loaded at run time), GPU decoding, GPUDirect Storage, the CPU and the versions of the libraries
// the codecs and stores use. Thread-safe; loads the CUDA driver on first use.
#pragma once

#include <nlohmann/json.hpp>

namespace zarrstream::tools {

// {"zarrstream_version", "cuda_compiled" (nvcc built the kernels in), "gpu" (null, or name /
// memory_bytes / driver_cuda_version / devices), "gpu_unavailable_reason", "nvcomp_version",
// "nvcomp_library", "nvcomp_unavailable_reason", "gpu_batches" (a Loader can use device cuda),
// "gpu_batches_unavailable_reason", "gpu_decoding" (GPU batches and nvCOMP: chunks of the
// chains gpu/gpu_chunk_codec.h's PlanGpuDecode accepts decode on the GPU), "gds"
// (cufile_library: found; used: false, the loader stages reads in pinned memory), "nvtx" (the
// loader's stages emit NVTX ranges), "cpu" (model, cores, features), "memory_bytes", "http"
// (io_threads / max_in_flight / max_in_flight_per_host remote reads use, or the error a
// malformed ZARRSTREAM_HTTP_* setting makes), "buffer_cache_bytes" (util/block_cache.h's limit),
// "libraries" (name → version)}. Unset reasons are null.
nlohmann::json EnvironmentReport();

}  // namespace zarrstream::tools
