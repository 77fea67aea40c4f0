// An NVTX tool for the tests (loaded through NVTX_INJECTION64_PATH, as Nsight Systems is): it
// records every range started in every domain, with its payload, and counts the ranges not yet
// ended. Queried through the C functions at the end.
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

std::mutex mutex;
std::map<std::string, std::vector<uint64_t>> ranges;  // "domain/message" → payloads, in order
std::vector<std::string> domain_names;                // handle h names domain_names[h - 1]
std::atomic<int64_t> open_ranges{0};
std::atomic<uint64_t> next_id{1};

nvtxDomainHandle_t DomainCreateA(const char* name) {
  std::lock_guard<std::mutex> lock(mutex);
  domain_names.emplace_back(name);
  return reinterpret_cast<nvtxDomainHandle_t>(static_cast<uintptr_t>(domain_names.size()));
}

nvtxRangeId_t DomainRangeStartEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  std::lock_guard<std::mutex> lock(mutex);
  const auto h = reinterpret_cast<uintptr_t>(domain);
  std::string key = h >= 1 && h <= domain_names.size() ? domain_names[h - 1] : "(none)";
  key += "/";
  key += a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "(not ascii)";
  ranges[key].push_back(a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 ? a->payload.ullValue
                                                                           : ~uint64_t{0});
  ++open_ranges;
  return next_id++;
}

void DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t) { --open_ranges; }

}  // namespace

extern "C" {

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks == nullptr ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
      size <= NVTX_CBID_CORE2_DomainCreateA) {
    return 0;
  }
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(&DomainCreateA);
  *table[NVTX_CBID_CORE2_DomainRangeStartEx] =
      reinterpret_cast<NvtxFunctionPointer>(&DomainRangeStartEx);
  *table[NVTX_CBID_CORE2_DomainRangeEnd] = reinterpret_cast<NvtxFunctionPointer>(&DomainRangeEnd);
  return 1;
}

// The payloads of the ranges named `domain_slash_message`: copies up to `capacity` into
// `payloads` and returns how many there were.
size_t NvtxCountingPayloads(const char* domain_slash_message, uint64_t* payloads, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = ranges.find(domain_slash_message);
  if (it == ranges.end()) return 0;
  std::memcpy(payloads, it->second.data(),
              std::min(capacity, it->second.size()) * sizeof(uint64_t));
  return it->second.size();
}

int64_t NvtxCountingOpenRanges() { return open_ranges; }

}  // extern "C"
