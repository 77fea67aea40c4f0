#include "cli/doctor_command.h"

#include <cstdio>
#include <string>

#include "tools/environment_report.h"
#include "util/format.h"

namespace zarrstream::cli {

int RunDoctor(bool json) {
  const nlohmann::json report = tools::EnvironmentReport();
  if (json) {
    std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }
  std::printf("zarrstream %s\n", report["zarrstream_version"].get<std::string>().c_str());
  const nlohmann::json& gpu = report["gpu"];
  if (gpu.is_null()) {
    std::printf("gpu: none (%s): batches are made on the CPU\n",
                report["gpu_unavailable_reason"].get<std::string>().c_str());
  } else {
    std::printf("gpu: %s, %s, %d device(s), driver for CUDA %s: batch buffers are pinned\n",
                gpu.value("name", std::string("?")).c_str(),
                FormatBytes(gpu.value("memory_bytes", 0.0)).c_str(), gpu["devices"].get<int>(),
                gpu["driver_cuda_version"].get<std::string>().c_str());
  }
  if (!report.value("gpu_batches", false)) {
    std::printf("gpu batches: no (%s)\n",
                report["gpu_batches_unavailable_reason"].get<std::string>().c_str());
  } else if (report["nvcomp_version"].is_null()) {
    std::printf("gpu batches: yes; gpu decoding: no (%s): chunks decode on the CPU\n",
                report["nvcomp_unavailable_reason"].get<std::string>().c_str());
  } else {
    std::string codecs;
    for (const auto& c : report["gpu_codecs"]) codecs += (codecs.empty() ? "" : ", ") + c.get<std::string>();
    std::printf("gpu batches: yes; gpu decoding: nvCOMP %s (%s): %s\n",
                report["nvcomp_version"].get<std::string>().c_str(),
                report["nvcomp_library"].get<std::string>().c_str(), codecs.c_str());
  }
  std::printf("GPUDirect Storage (cuFile): %s\n",
              report["gds"]["cufile_library"].get<bool>() ? "library found" : "not found");
  const nlohmann::json& cpu = report["cpu"];
  std::string features;
  for (const auto& [name, present] : cpu["features"].items()) {
    if (present.get<bool>()) features += " " + name;
  }
  std::printf("cpu: %s, %u cores,%s; memory %s\n", cpu["model"].get<std::string>().c_str(),
              cpu["cores"].get<unsigned>(),
              features.empty() ? " no SIMD extensions" : features.c_str(),
              FormatBytes(report["memory_bytes"].get<double>()).c_str());
  std::printf("libraries:");
  std::string separator = " ";
  for (const auto& [name, version] : report["libraries"].items()) {
    std::printf("%s%s %s", separator.c_str(), name.c_str(), version.get<std::string>().c_str());
    separator = ", ";
  }
  std::printf("\n");
  return 0;
}

}  // namespace zarrstream::cli
