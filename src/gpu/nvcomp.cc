#include "gpu/nvcomp.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "gpu/cuda_driver.h"

namespace zarrstream {

namespace {

using NvcompStatus = int32_t;
constexpr NvcompStatus kNvcompSuccess = 0;

// The decompression options every codec takes by value: 64 bytes whose leading fields (backend,
// sorting, data type, bitshuffle) are all 0 in nvCOMP's defaults, which are what zarrstream uses.
struct DecompressOptions {
  int32_t words[16] = {};
};
static_assert(sizeof(DecompressOptions) == 64);

struct Properties {
  uint32_t version = 0;
  uint32_t cudart_version = 0;
};

using TempSizeFn = NvcompStatus (*)(size_t, size_t, DecompressOptions, size_t*, size_t, void*);
using DecompressFn = NvcompStatus (*)(const void* const*, const size_t*, const size_t*, size_t*,
                                      size_t, void*, size_t, void* const*, DecompressOptions,
                                      NvcompStatus*, void*);

// nvcompAlignmentRequirements_t: the alignment each input, output and scratch buffer needs.
struct AlignmentRequirements {
  size_t input = 0;
  size_t output = 0;
  size_t temp = 0;
};
using AlignmentsFn = NvcompStatus (*)(DecompressOptions, AlignmentRequirements*);

// crc32.h's nvcompBatchedCRC32Opts_t (128 bytes, passed by value): the CRC model, then the kernel
// configuration nvcompBatchedCRC32GetHeuristicConf fills; reserved bytes zero.
struct Crc32Spec {
  uint32_t poly = 0;
  uint32_t init = 0;
  bool ref_in = false;
  bool ref_out = false;
  uint32_t xorout = 0;
  char reserved[16] = {};
};
struct Crc32KernelConf {
  int32_t kernel_kind = 0;
  int32_t bytes_per_read = 0;
  int32_t blocks_per_msg = 0;
  char reserved[20] = {};
};
struct Crc32Options {
  Crc32Spec spec;
  Crc32KernelConf kernel_conf;
  char reserved[64] = {};
};
static_assert(sizeof(Crc32Spec) == 32 && sizeof(Crc32KernelConf) == 32 &&
              sizeof(Crc32Options) == 128);
// CRC-32/ISO-HDLC, gzip's (crc32.h: nvcompCRC32).
constexpr Crc32Spec kGzipCrc32 = {0x04C11DB7, 0xFFFFFFFF, true, true, 0xFFFFFFFF, {}};
constexpr int32_t kCrc32OnlySegment = 0;  // nvcompCRC32OnlySegment: each input is a whole message

using Crc32Fn = NvcompStatus (*)(const void* const*, const size_t*, size_t, uint32_t*, Crc32Options,
                                 int32_t, NvcompStatus*, void*);
using Crc32ConfFn = NvcompStatus (*)(const size_t*, size_t, Crc32KernelConf*, size_t, void*);

}  // namespace

struct Nvcomp::Api {
  NvcompStatus (*nvcompGetProperties)(Properties*) = nullptr;
  TempSizeFn temp_size[4] = {};  // by GpuCompression
  DecompressFn decompress[4] = {};
  size_t input_alignment[4] = {};  // by GpuCompression: what the library asks for, or 16
  Crc32Fn crc32 = nullptr;         // null in nvCOMP before 6.0
  Crc32ConfFn crc32_conf = nullptr;
};

std::string_view GpuCompressionName(GpuCompression compression) {
  switch (compression) {
    case GpuCompression::kZstd:
      return "zstd";
    case GpuCompression::kLz4:
      return "lz4";
    case GpuCompression::kDeflate:
      return "deflate";
    case GpuCompression::kGzip:
      return "gzip";
  }
  return "?";
}

std::string Nvcomp::StatusName(int32_t status) {
  switch (status) {
    case 0:
      return "nvcompSuccess";
    case 10:
      return "nvcompErrorInvalidValue";
    case 11:
      return "nvcompErrorNotSupported";
    case 12:
      return "nvcompErrorCannotDecompress";
    case 13:
      return "nvcompErrorBadChecksum";
    case 14:
      return "nvcompErrorCannotVerifyChecksums";
    case 15:
      return "nvcompErrorOutputBufferTooSmall";
    case 16:
      return "nvcompErrorWrongHeaderLength";
    case 17:
      return "nvcompErrorAlignment";
    case 18:
      return "nvcompErrorChunkSizeTooLarge";
    case 20:
      return "nvcompErrorWrongInputLength";
    case 21:
      return "nvcompErrorBatchSizeTooLarge";
    case 1000:
      return "nvcompErrorCudaError";
    case 10000:
      return "nvcompErrorInternal";
    default:
      return "nvcompStatus_t " + std::to_string(status);
  }
}

struct LoadedNvcomp {
  Nvcomp* nvcomp = nullptr;
  std::string reason;
};

class NvcompLoader {
 public:
  // ": " and the reason of the last failed dlopen, or "" where it gave none.
  static std::string DlError() {
    const char* error = dlerror();
    return error != nullptr ? std::string(": ") + error : std::string();
  }

  static LoadedNvcomp Load() {
    LoadedNvcomp loaded;
    if (!CudaDriver::Present()) {
      loaded.reason = "no CUDA driver: " + CudaDriver::UnavailableReason();
      return loaded;
    }
    const char* configured = std::getenv("ZARRSTREAM_NVCOMP_LIBRARY");
    const bool is_configured = configured != nullptr && *configured != '\0';
    std::string name = is_configured ? configured : "libnvcomp.so.6";
    void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string error = library == nullptr ? DlError() : std::string();
    if (library == nullptr && !is_configured) {
      // The command a zarrstream wheel installs has no Python import to set the variable: it looks
      // for the nvCOMP wheel that `zarrstream[gpu]` installed beside it.
      std::error_code no_link;
      const std::filesystem::path executable =
          std::filesystem::read_symlink("/proc/self/exe", no_link);
      if (!executable.empty()) {
        const std::string beside = Nvcomp::WheelLibraryBesideCommand(executable.string());
        library = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (library != nullptr) {
          name = beside;
        } else {
          error += "; nor " + beside + DlError();
        }
      }
    }
    if (library == nullptr) {
      loaded.reason = "nvCOMP (" + name + ") could not be loaded" + error +
                      "; install the PyPI package nvidia-libnvcomp-cu13";
      return loaded;
    }
    static Nvcomp::Api api;
    static constexpr const char* kNames[4] = {"Zstd", "LZ4", "Deflate", "Gzip"};
    bool complete = (api.nvcompGetProperties = reinterpret_cast<decltype(api.nvcompGetProperties)>(
                         dlsym(library, "nvcompGetProperties"))) != nullptr;
    for (int i = 0; i < 4 && complete; ++i) {
      const std::string prefix = std::string("nvcompBatched") + kNames[i];
      api.temp_size[i] =
          reinterpret_cast<TempSizeFn>(dlsym(library, (prefix + "DecompressGetTempSize").c_str()));
      api.decompress[i] =
          reinterpret_cast<DecompressFn>(dlsym(library, (prefix + "DecompressAsync").c_str()));
      complete = api.temp_size[i] != nullptr && api.decompress[i] != nullptr;
      // Asked once; a library without the query gets what every nvCOMP accepts.
      const auto alignments = reinterpret_cast<AlignmentsFn>(
          dlsym(library, (prefix + "DecompressGetRequiredAlignments").c_str()));
      AlignmentRequirements required;
      const bool known = alignments != nullptr &&
                         alignments(DecompressOptions{}, &required) == kNvcompSuccess &&
                         required.input > 0 && required.input <= Nvcomp::kMaxInputAlignment &&
                         (required.input & (required.input - 1)) == 0;
      api.input_alignment[i] = known ? required.input : Nvcomp::kMaxInputAlignment;
    }
    if (!complete) {
      loaded.reason = name + " lacks an entry point zarrstream needs (nvCOMP 5 or later needed)";
      return loaded;
    }
    api.crc32 = reinterpret_cast<Crc32Fn>(dlsym(library, "nvcompBatchedCRC32Async"));
    api.crc32_conf =
        reinterpret_cast<Crc32ConfFn>(dlsym(library, "nvcompBatchedCRC32GetHeuristicConf"));
    if (api.crc32_conf == nullptr) api.crc32 = nullptr;  // both or neither
    Properties properties;
    if (api.nvcompGetProperties(&properties) != kNvcompSuccess) {
      loaded.reason = "nvcompGetProperties failed";
      return loaded;
    }
    loaded.nvcomp = new Nvcomp();  // lives for the process, as the library stays loaded
    loaded.nvcomp->api_ = &api;
    const uint32_t v = properties.version;
    loaded.nvcomp->version_ = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 100) +
                              "." + std::to_string(v % 100);
    Dl_info info;
    loaded.nvcomp->library_ =
        dladdr(reinterpret_cast<void*>(api.nvcompGetProperties), &info) != 0 &&
                info.dli_fname != nullptr
            ? info.dli_fname
            : name;
    return loaded;
  }
};

std::string Nvcomp::WheelLibraryBesideCommand(std::string_view executable) {
  const std::filesystem::path scripts = std::filesystem::path(executable).parent_path();
  return (scripts.parent_path() / "nvidia" / "libnvcomp" / "lib64" / "libnvcomp.so.6").string();
}

namespace {

const LoadedNvcomp& Instance() {
  static const LoadedNvcomp loaded = NvcompLoader::Load();
  return loaded;
}

Status NvcompError(std::string_view call, GpuCompression compression, NvcompStatus status) {
  return CudaError(std::string(call) + " (" + std::string(GpuCompressionName(compression)) +
                   ") failed: " + Nvcomp::StatusName(status));
}

}  // namespace

const Nvcomp* Nvcomp::Get() { return Instance().nvcomp; }

size_t Nvcomp::InputAlignment(GpuCompression compression) const {
  return api_->input_alignment[static_cast<size_t>(compression)];
}

std::string Nvcomp::UnavailableReason() { return Instance().reason; }

Result<size_t> Nvcomp::TempBytes(const CudaDriver& driver, GpuCompression compression,
                                 size_t chunks, size_t max_chunk_bytes, size_t total_bytes,
                                 void* stream) const {
  size_t bytes = 0;
  const auto index = static_cast<size_t>(compression);
  ZS_RETURN_IF_ERROR(driver.InContext([&] {
    const NvcompStatus status = api_->temp_size[index](chunks, max_chunk_bytes, DecompressOptions{},
                                                       &bytes, total_bytes, stream);
    return status == kNvcompSuccess ? Status::Ok()
                                    : NvcompError("DecompressGetTempSize", compression, status);
  }));
  return bytes;
}

Status Nvcomp::DecompressAsync(const CudaDriver& driver, GpuCompression compression,
                               const uint64_t* compressed, const uint64_t* compressed_bytes,
                               const uint64_t* output_bytes, uint64_t* decoded_bytes, size_t chunks,
                               void* temp, size_t temp_bytes, const uint64_t* outputs,
                               int32_t* statuses, void* stream) const {
  static_assert(sizeof(uint64_t) == sizeof(void*) && sizeof(uint64_t) == sizeof(size_t));
  const auto index = static_cast<size_t>(compression);
  return driver.InContext([&] {
    const NvcompStatus status = api_->decompress[index](
        reinterpret_cast<const void* const*>(compressed),
        reinterpret_cast<const size_t*>(compressed_bytes),
        reinterpret_cast<const size_t*>(output_bytes), reinterpret_cast<size_t*>(decoded_bytes),
        chunks, temp, temp_bytes, reinterpret_cast<void* const*>(outputs), DecompressOptions{},
        statuses, stream);
    return status == kNvcompSuccess ? Status::Ok()
                                    : NvcompError("DecompressAsync", compression, status);
  });
}

bool Nvcomp::has_crc32() const { return api_->crc32 != nullptr; }

Status Nvcomp::Crc32Async(const CudaDriver& driver, const uint64_t* inputs,
                          const uint64_t* input_bytes, size_t chunks, size_t max_input_bytes,
                          uint32_t* crcs, void* stream) const {
  return driver.InContext([&] {
    Crc32Options options;
    options.spec = kGzipCrc32;
    // Given the largest size, the heuristic neither reads device memory nor synchronizes.
    NvcompStatus status = api_->crc32_conf(nullptr, chunks, &options.kernel_conf,
                                           std::max<size_t>(max_input_bytes, 1), stream);
    if (status != kNvcompSuccess) {
      return CudaError("nvcompBatchedCRC32GetHeuristicConf failed: " + Nvcomp::StatusName(status));
    }
    status = api_->crc32(reinterpret_cast<const void* const*>(inputs),
                         reinterpret_cast<const size_t*>(input_bytes), chunks, crcs, options,
                         kCrc32OnlySegment, nullptr, stream);
    return status == kNvcompSuccess
               ? Status::Ok()
               : CudaError("nvcompBatchedCRC32Async failed: " + Nvcomp::StatusName(status));
  });
}

}  // namespace zarrstream
