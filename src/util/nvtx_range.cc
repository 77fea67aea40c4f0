#include "util/nvtx_range.h"

#ifdef ZARRSTREAM_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace zarrstream {

#ifdef ZARRSTREAM_NVTX
namespace {

nvtxDomainHandle_t Domain() {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("zarrstream");
  return domain;
}

}  // namespace

NvtxRange::NvtxRange(const char* name, uint64_t batch) {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  attributes.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  attributes.payload.ullValue = batch;
  id_ = nvtxDomainRangeStartEx(Domain(), &attributes);
  open_ = true;
}

void NvtxRange::End() {
  if (!open_) return;
  nvtxDomainRangeEnd(Domain(), id_);
  open_ = false;
}

bool NvtxRange::Compiled() { return true; }
#else
NvtxRange::NvtxRange(const char*, uint64_t) {}
void NvtxRange::End() {}
bool NvtxRange::Compiled() { return false; }
#endif

}  // namespace zarrstream
