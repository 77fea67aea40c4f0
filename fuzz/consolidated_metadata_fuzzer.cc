// libFuzzer target: consolidated v2 .zmetadata documents.
//
// A .zmetadata maps "<path>/.zarray", ".zgroup" and ".zattrs" keys to whole documents; the parser
// pairs them up per node and normalises every array. Each array's codec chain must then prepare
// for its chunk shape or fail with an error.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "codec/codec_chain.h"
#include "fuzz/fuzz_check.h"
#include "metadata/v2_metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zarrstream;
  auto nodes =
      ParseV2ConsolidatedMetadata(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!nodes.ok()) {
    fuzz::CheckNotInternal(nodes.status(), "ParseV2ConsolidatedMetadata");
    return 0;
  }
  for (const auto& [path, node] : *nodes) {
    const auto* array = std::get_if<ArrayMetadata>(&node);
    if (array == nullptr) continue;
    ChunkRepresentation chunk;
    chunk.data_type = array->data_type;
    chunk.shape = array->chunk_shape;
    chunk.fill_value = array->fill_value;
    auto chain = CodecChain::Make(array->codecs, chunk);
    if (!chain.ok()) fuzz::CheckNotInternal(chain.status(), "CodecChain::Make");
  }
  return 0;
}
