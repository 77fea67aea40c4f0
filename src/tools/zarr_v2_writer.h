// Writing Zarr v2 stores, which zarrstream's own writer (v3 only) does not do: just what the synth
// tool needs for WeatherBench2-style layouts. Groups and arrays become .zgroup / .zarray / .zattrs
// JSON; whole chunks are encoded with the codec chain the metadata layer derives from that very
// .zarray (so the bytes written are exactly what every reader of the metadata decodes); a group's
// metadata is consolidated into .zmetadata the way zarr-python's consolidate_metadata writes it.
//
// Threads: a V2ArrayWriter is immutable once created; WriteChunk may be called from any number of
// threads at once for different chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codec/codec_chain.h"
#include "metadata/array_metadata.h"
#include "store/store.h"
#include "zarrstream/data_type.h"

namespace zarrstream::tools {

struct V2ArraySpec {
  std::vector<uint64_t> shape;
  std::vector<uint64_t> chunks;
  DataType dtype = DataType::kFloat32;
  // The numcodecs compressor configuration ({"id": "blosc", ...}), or null for none.
  nlohmann::json compressor;
  // The .zarray fill_value: a number, "NaN", or null.
  nlohmann::json fill_value;
  // Written as the _ARRAY_DIMENSIONS attribute (xarray's convention); empty for none.
  std::vector<std::string> dims;
  // Other attributes (a JSON object).
  nlohmann::json attributes = nlohmann::json::object();
};

class V2ArrayWriter {
 public:
  // Writes the array's .zarray and .zattrs at `path` in `store` (replacing any there) and
  // prepares the codec chain. Errors name the array.
  static Result<V2ArrayWriter> Create(std::shared_ptr<Store> store, std::string path,
                                      const V2ArraySpec& spec);

  // Encodes and stores the chunk at grid index `chunk_index` from `values`: a whole chunk, C
  // order, native byte order (v2 stores edge chunks in full chunk shape too). Errors name the
  // array and the chunk key.
  Status WriteChunk(std::span<const uint64_t> chunk_index, std::span<const std::byte> values) const;

  // The metadata as the metadata layer parsed it back (the v3-style model).
  const ArrayMetadata& metadata() const { return *metadata_; }

 private:
  V2ArrayWriter() = default;

  std::shared_ptr<Store> store_;
  std::string path_;
  std::string description_;  // "array 'x' in <url>"
  std::shared_ptr<const ArrayMetadata> metadata_;
  std::shared_ptr<const CodecChain> chain_;
};

// Writes a v2 group's .zgroup and .zattrs at `path` ("" for the store root).
Status WriteV2Group(Store& store, std::string_view path, const nlohmann::json& attributes);

// Gathers the .zgroup, .zarray and .zattrs documents of every node under the group at `path`
// into its .zmetadata ({"metadata": {...}, "zarr_consolidated_format": 1}), so readers open the
// whole hierarchy with one read.
Status ConsolidateV2Metadata(Store& store, std::string_view path);

}  // namespace zarrstream::tools
