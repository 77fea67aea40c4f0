#include "cli/doctor_command.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "tools/environment_report.h"
#include "tools/store_advice.h"
#include "util/format.h"

namespace zarrstream::cli {

namespace {

void PrintStoreAdvice(const nlohmann::json& advice) {
  std::printf("\n%s (%s", advice["url"].get<std::string>().c_str(),
              advice["kind"].get<std::string>().c_str());
  if (advice["consolidated"].is_boolean()) {
    std::printf(", %s metadata",
                advice["consolidated"].get<bool>() ? "consolidated" : "no consolidated");
  }
  std::printf(", opened in %llu request(s))\n",
              static_cast<unsigned long long>(advice["open_requests"].get<uint64_t>()));
  for (const auto& a : advice["arrays"]) {
    std::string chunks;
    for (size_t d = 0; d < a["chunks"].size(); ++d) {
      chunks += (d ? ", " : "") + a["dims"][d].get<std::string>() + "=" +
                std::to_string(a["chunks"][d].get<uint64_t>());
    }
    std::printf("  %-28s chunks (%s), %s each%s, %s: %s\n", a["name"].get<std::string>().c_str(),
                chunks.c_str(), FormatBytes(a["chunk_bytes"].get<double>()).c_str(),
                a["shard_shape"].is_null() ? "" : ", sharded",
                a["gpu_decodable"].get<bool>() ? "GPU-decodable" : "decoded on the CPU",
                a["gpu_decode"].get<std::string>().c_str());
  }
  if (advice.contains("skipped_arrays")) {
    for (const auto& skipped : advice["skipped_arrays"]) {
      std::printf("  %-28s skipped: %s\n", skipped["name"].get<std::string>().c_str(),
                  skipped["reason"].get<std::string>().c_str());
    }
  }
  if (advice["findings"].empty()) {
    std::printf("  the layout suits training reads here\n");
  }
  for (const auto& f : advice["findings"]) {
    std::string arrays;
    const size_t n = f["arrays"].size();
    for (size_t i = 0; i < std::min<size_t>(n, 3); ++i) {
      arrays += (i ? ", " : "") + f["arrays"][i].get<std::string>();
    }
    if (n > 3) arrays += " and " + std::to_string(n - 3) + " more";
    std::printf("  %s: %s%s\n", f["severity"].get<std::string>().c_str(),
                arrays.empty() ? "" : (arrays + ": ").c_str(),
                f["message"].get<std::string>().c_str());
  }
  if (!advice["rechunk_command"].is_null()) {
    std::printf("fix: %s\n", advice["rechunk_command"].get<std::string>().c_str());
  }
}

}  // namespace

int RunDoctor(const std::string& url, bool json) {
  const nlohmann::json report = tools::EnvironmentReport();
  nlohmann::json advice;
  if (!url.empty()) {
    Result<nlohmann::json> checked = tools::StoreAdvice(url);
    if (!checked.ok()) {
      std::fprintf(stderr, "zarrstream doctor: %s\n", checked.status().ToString().c_str());
      return 1;
    }
    advice = std::move(*checked);
  }
  if (json) {
    const nlohmann::json out =
        url.empty() ? report : nlohmann::json{{"environment", report}, {"store", advice}};
    std::printf("%s\n", out.dump(2).c_str());
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
    std::printf(
        "gpu batches: yes; gpu decoding: nvCOMP %s (%s); which arrays it decodes: zarrstream "
        "doctor STORE, or zarrstream inspect STORE\n",
        report["nvcomp_version"].get<std::string>().c_str(),
        report["nvcomp_library"].get<std::string>().c_str());
  }
  std::printf("GPUDirect Storage (cuFile): %s; not used (reads are staged in pinned memory)\n",
              report["gds"]["cufile_library"].get<bool>() ? "library found" : "not found");
  std::printf("NVTX ranges on the loader's stages (Nsight Systems): %s\n",
              report["nvtx"].get<bool>() ? "on" : "not in this build");
  const nlohmann::json& grids = report["gpu_grids"];
  if (grids.contains("error")) {
    std::printf("the loader's GPU kernels: %s\n", grids["error"].get<std::string>().c_str());
  } else {
    std::printf(
        "the loader's GPU kernels: grids of at most %u blocks per multiprocessor "
        "(ZARRSTREAM_GPU_BLOCKS_PER_SM)\n",
        grids["blocks_per_sm"].get<unsigned>());
  }
  const nlohmann::json& cpu = report["cpu"];
  std::string features;
  for (const auto& [name, present] : cpu["features"].items()) {
    if (present.get<bool>()) features += " " + name;
  }
  const unsigned cores = cpu["cores"].get<unsigned>();
  const unsigned usable = cpu["usable_cores"].get<unsigned>();
  const std::string usable_note =
      usable < cores ? " (" + std::to_string(usable) + " usable by this process)" : "";
  std::printf("cpu: %s, %u cores%s,%s; memory %s\n", cpu["model"].get<std::string>().c_str(), cores,
              usable_note.c_str(), features.empty() ? " no SIMD extensions" : features.c_str(),
              FormatBytes(report["memory_bytes"].get<double>()).c_str());
  const nlohmann::json& http = report["http"];
  if (http.contains("error")) {
    std::printf("remote reads: %s\n", http["error"].get<std::string>().c_str());
  } else {
    std::printf(
        "remote reads: %zu I/O threads, %zu requests in flight, %zu per host; buffer cache "
        "%s\n",
        http["io_threads"].get<size_t>(), http["max_in_flight"].get<size_t>(),
        http["max_in_flight_per_host"].get<size_t>(),
        FormatBytes(report["buffer_cache_bytes"].get<double>()).c_str());
  }
  std::printf("libraries:");
  std::string separator = " ";
  for (const auto& [name, version] : report["libraries"].items()) {
    std::printf("%s%s %s", separator.c_str(), name.c_str(), version.get<std::string>().c_str());
    separator = ", ";
  }
  std::printf("\n");
  if (!url.empty()) PrintStoreAdvice(advice);
  return 0;
}

}  // namespace zarrstream::cli
