// libFuzzer target: Zarr v2 .zarray / .zgroup documents with their .zattrs.
//
// An input is the .zarray (or .zgroup) document, optionally followed by a NUL byte and the .zattrs
// document (JSON text cannot hold a raw NUL, so the split is unambiguous). Both parsers see it:
// the array parser normalises dtype, order, filters and compressor into a v3 codec chain, which
// must then prepare for the chunk shape or fail with an error.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "codec/codec_chain.h"
#include "fuzz/fuzz_check.h"
#include "metadata/v2_metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zarrstream;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view document = input;
  std::optional<std::string_view> zattrs;
  if (size_t nul = input.find('\0'); nul != std::string_view::npos) {
    document = input.substr(0, nul);
    zattrs = input.substr(nul + 1);
  }

  auto group = ParseV2GroupMetadata(document, zattrs);
  if (!group.ok()) fuzz::CheckNotInternal(group.status(), "ParseV2GroupMetadata");

  auto array = ParseV2ArrayMetadata(document, zattrs);
  if (!array.ok()) {
    fuzz::CheckNotInternal(array.status(), "ParseV2ArrayMetadata");
    return 0;
  }
  ChunkRepresentation chunk;
  chunk.data_type = array->data_type;
  chunk.shape = array->chunk_shape;
  chunk.fill_value = array->fill_value;
  auto chain = CodecChain::Make(array->codecs, chunk);
  if (!chain.ok()) fuzz::CheckNotInternal(chain.status(), "CodecChain::Make");
  return 0;
}
