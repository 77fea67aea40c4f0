#include "tools/zarr_v2_writer.h"

#include <algorithm>
#include <array>

#include "metadata/v2_metadata.h"
#include "util/format.h"

namespace zarrstream::tools {

namespace {

using nlohmann::json;

Status PutJson(Store& store, std::string_view path, std::string_view name, const json& doc) {
  const std::string text = doc.dump(2);
  return store.Put(JoinKey(path, name),
                   std::as_bytes(std::span<const char>(text.data(), text.size())));
}

std::string_view BaseName(std::string_view key) {
  const size_t slash = key.rfind('/');
  return slash == std::string_view::npos ? key : key.substr(slash + 1);
}

}  // namespace

Result<V2ArrayWriter> V2ArrayWriter::Create(std::shared_ptr<Store> store, std::string path,
                                            const V2ArraySpec& spec) {
  V2ArrayWriter writer;
  writer.description_ = "array '" + path + "' in " + store->url();
  const json zarray = {
      {"zarr_format", 2},
      {"shape", spec.shape},
      {"chunks", spec.chunks},
      {"dtype", NumpyTypeString(spec.dtype)},
      {"compressor", spec.compressor},
      {"fill_value", spec.fill_value},
      {"order", "C"},
      {"filters", nullptr},
      {"dimension_separator", "."},
  };
  json zattrs = spec.attributes;
  if (!spec.dims.empty()) zattrs["_ARRAY_DIMENSIONS"] = spec.dims;
  // Parse what we are about to write: the metadata layer's reading of it is the definition of
  // how its chunks must be encoded.
  ZS_ASSIGN_OR_RETURN_CTX(ArrayMetadata metadata,
                          ParseV2ArrayMetadata(zarray.dump(), zattrs.dump()),
                          "creating " + writer.description_);
  ChunkRepresentation chunk{metadata.data_type, metadata.chunk_shape, metadata.fill_value};
  ZS_ASSIGN_OR_RETURN_CTX(writer.chain_, CodecChain::Make(metadata.codecs, chunk),
                          "creating " + writer.description_);
  ZS_RETURN_IF_ERROR_CTX(PutJson(*store, path, ".zarray", zarray),
                         "creating " + writer.description_);
  ZS_RETURN_IF_ERROR_CTX(PutJson(*store, path, ".zattrs", zattrs),
                         "creating " + writer.description_);
  writer.metadata_ = std::make_shared<const ArrayMetadata>(std::move(metadata));
  writer.store_ = std::move(store);
  writer.path_ = std::move(path);
  return writer;
}

Status V2ArrayWriter::WriteChunk(std::span<const uint64_t> chunk_index,
                                 std::span<const std::byte> values) const {
  const std::string key = JoinKey(path_, metadata_->chunk_key_encoding.EncodeKey(chunk_index));
  std::string context = "writing chunk '";
  context += key;
  context += "' of ";
  context += description_;
  const std::vector<uint64_t> grid = metadata_->grid_shape();
  bool inside = chunk_index.size() == grid.size();
  for (size_t d = 0; inside && d < grid.size(); ++d) inside = chunk_index[d] < grid[d];
  if (!inside) {
    return InvalidArgumentError(context + ": chunk index " + FormatIndex(chunk_index) +
                                " outside the chunk grid " + FormatIndex(grid));
  }
  ByteBuffer encoded;
  ZS_RETURN_IF_ERROR_CTX(chain_->Encode(values, &encoded), context);
  ZS_RETURN_IF_ERROR_CTX(store_->Put(key, encoded.span()), context);
  return Status::Ok();
}

Status WriteV2Group(Store& store, std::string_view path, const json& attributes) {
  std::string context = "creating group '";
  context += path;
  context += "' in ";
  context += store.url();
  ZS_RETURN_IF_ERROR_CTX(PutJson(store, path, ".zgroup", json{{"zarr_format", 2}}), context);
  ZS_RETURN_IF_ERROR_CTX(PutJson(store, path, ".zattrs", attributes), context);
  return Status::Ok();
}

Status ConsolidateV2Metadata(Store& store, std::string_view path) {
  std::string context = "consolidating the metadata of group '";
  context += path;
  context += "' in ";
  context += store.url();
  ZS_ASSIGN_OR_RETURN_CTX(std::vector<KeyInfo> keys, store.List(path), context);
  constexpr std::array<std::string_view, 3> kDocuments = {".zgroup", ".zarray", ".zattrs"};
  json metadata = json::object();
  const size_t prefix = path.empty() ? 0 : path.size() + 1;
  for (const KeyInfo& info : keys) {
    const std::string_view name = BaseName(info.key);
    if (std::find(kDocuments.begin(), kDocuments.end(), name) == kDocuments.end()) continue;
    ZS_ASSIGN_OR_RETURN_CTX(ByteBuffer bytes, store.ReadAll(info.key), context);
    json doc = json::parse(bytes.view(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return MetadataError(context + ": '" + info.key + "' is not JSON");
    metadata[info.key.substr(prefix)] = std::move(doc);
  }
  const json zmetadata = {{"metadata", std::move(metadata)}, {"zarr_consolidated_format", 1}};
  ZS_RETURN_IF_ERROR_CTX(PutJson(store, path, ".zmetadata", zmetadata), context);
  return Status::Ok();
}

}  // namespace zarrstream::tools
