// libFuzzer target: Zarr v3 zarr.json documents (arrays, groups, inline consolidated metadata).
//
// Each input is one zarr.json. Beyond "never crash", it checks the two things a reader relies on
// after parsing: that an array's codec list can be prepared (or rejected with an error) for its
// chunk shape, however hostile the shape, and that what the writer serialises parses again.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "codec/codec_chain.h"
#include "fuzz/fuzz_check.h"
#include "metadata/v3_metadata.h"

namespace zarrstream::fuzz {
namespace {

// Serialises without throwing: strings parsed from the input are valid UTF-8, but a failure here
// must be the library's, not the dump's.
std::string Dump(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void CheckArray(const ArrayMetadata& array) {
  ChunkRepresentation chunk;
  chunk.data_type = array.data_type;
  chunk.shape = array.chunk_shape;
  chunk.fill_value = array.fill_value;
  auto chain = CodecChain::Make(array.codecs, chunk);
  if (!chain.ok()) CheckNotInternal(chain.status(), "CodecChain::Make");

  auto reparsed = ParseV3Metadata(Dump(ArrayMetadataToV3Json(array)));
  if (!reparsed.ok())
    FuzzFail("ArrayMetadataToV3Json wrote a zarr.json that does not parse:", reparsed.status());
  if (!std::holds_alternative<ArrayMetadata>(*reparsed)) {
    FuzzFail("ArrayMetadataToV3Json wrote a group");
  }
}

void CheckGroup(const GroupMetadata& group) {
  auto reparsed = ParseV3Metadata(Dump(GroupMetadataToV3Json(group)));
  if (!reparsed.ok())
    FuzzFail("GroupMetadataToV3Json wrote a zarr.json that does not parse:", reparsed.status());
  if (!group.consolidated) return;
  for (const auto& [path, node] : *group.consolidated) {
    // An unsupported member is a placeholder (its document is kept, and written back as it came),
    // not metadata to check.
    const auto* array = std::get_if<ArrayMetadata>(&node);
    if (array != nullptr && !array->unsupported) CheckArray(*array);
  }
}

}  // namespace
}  // namespace zarrstream::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zarrstream;
  auto node = ParseV3Metadata(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!node.ok()) {
    fuzz::CheckNotInternal(node.status(), "ParseV3Metadata");
    return 0;
  }
  if (const auto* array = std::get_if<ArrayMetadata>(&*node)) {
    fuzz::CheckArray(*array);
  } else {
    fuzz::CheckGroup(std::get<GroupMetadata>(*node));
  }
  return 0;
}
