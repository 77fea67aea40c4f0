// The one metadata model for Zarr v3 and v2 arrays and groups. Parsing only: no I/O in this layer.
//
// Zarr v2 metadata is normalised into the v3 model when parsed (v3-style codec chain, chunk key
// encoding "v2"), so every layer above has a single path. See v3_metadata.h and v2_metadata.h for
// the parsers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "zarrstream/data_type.h"
#include "zarrstream/status.h"

namespace zarrstream {

// One entry of a codec chain: the codec's registered name and its configuration object ({} when
// the metadata gave none). Names are the v3 names ("bytes", "zstd", "sharding_indexed"); v2
// compressors and filters are named "numcodecs.<id>" unless they map onto a v3 codec exactly.
struct CodecSpec {
  std::string name;
  nlohmann::json configuration = nlohmann::json::object();
  bool operator==(const CodecSpec&) const = default;
};

// How chunk grid indices become store keys.
struct ChunkKeyEncoding {
  enum class Kind : uint8_t { kDefault, kV2 };
  Kind kind = Kind::kDefault;
  char separator = '/';

  // kDefault: "c" + (separator + index)*  →  "c/1/0/3" (a 0-d array: "c").
  // kV2: indices joined by separator     →  "1.0.3"   (a 0-d array: "0").
  std::string EncodeKey(std::span<const uint64_t> chunk_index) const;
};

struct ArrayMetadata {
  int zarr_format = 3;
  std::vector<uint64_t> shape;
  DataType data_type = DataType::kFloat32;
  std::vector<uint64_t>
      chunk_shape;  // the regular chunk grid (for sharded arrays: the shard shape)
  ChunkKeyEncoding chunk_key_encoding;
  // The fill value as DataTypeSize(data_type) bytes in native byte order.
  std::vector<std::byte> fill_value;
  // True when v2 metadata said fill_value: null (missing chunks then read as zeros, fill_value
  // above).
  bool fill_value_is_null = false;
  // The v3-style codec chain: array→array codecs, exactly one array→bytes codec, bytes→bytes
  // codecs.
  std::vector<CodecSpec> codecs;
  // Dimension names (v3 dimension_names, v2 attribute _ARRAY_DIMENSIONS); empty when absent.
  // An unnamed dimension (null in v3) is the empty string.
  std::vector<std::string> dimension_names;
  nlohmann::json attributes = nlohmann::json::object();
  // Set for a type beyond the numeric core (extended_type.h). Time kinds keep data_type kInt64
  // (their storage) and read like it; text kinds have data_type kUInt8, which nothing reads, and
  // their codec chain is [text codec or "bytes", bytes→bytes codecs...] (see array/text_read.h).
  std::optional<ExtendedType> extended_type;
  // Text kinds: the fill value as one element's bytes (UTF-8 text, raw bytes, or JSON text).
  std::string text_fill_value;
  // Set, for an array listed in a group's consolidated metadata, when its metadata names
  // something this reader does not support (an unknown data type or codec): the group lists
  // the array and opening it is this error, so one such member does not hide its siblings.
  std::optional<Status> unsupported;
  // With `unsupported`, the member's document as the group stored it (Zarr v3), which a group
  // written back (its attributes changed) keeps as it was: nothing else of it was parsed.
  nlohmann::json unsupported_document;
  // Lower-case hex SHA-256 of the stored metadata documents this was parsed from (LoadNodeMetadata,
  // node_metadata_io.h): a dataset's identity for provenance. Empty for metadata taken from a
  // group's consolidated metadata, which the group's digest covers.
  std::string documents_sha256;

  uint64_t num_elements() const;             // product of shape
  std::vector<uint64_t> grid_shape() const;  // chunks per dimension (ceil division)
  uint64_t grid_extent(size_t d) const;      // grid_shape()[d], without the vector
  uint64_t num_chunks() const;               // product of grid_shape
};

struct GroupMetadata;

// A parsed node: an array or a group.
using NodeMetadata = std::variant<ArrayMetadata, GroupMetadata>;

// Metadata of every node below a group, keyed by path relative to that group ("a", "sub/b").
using ConsolidatedMetadata = std::map<std::string, NodeMetadata>;

struct GroupMetadata {
  int zarr_format = 3;
  nlohmann::json attributes = nlohmann::json::object();
  // Present when the group carried consolidated metadata (v3 "consolidated_metadata" in zarr.json,
  // or v2 .zmetadata parsed separately and attached by the array layer).
  std::shared_ptr<const ConsolidatedMetadata> consolidated;
  // As ArrayMetadata::documents_sha256: the group's documents (with .zmetadata, or zarr.json's
  // inline consolidated metadata, the consolidated metadata of every member).
  std::string documents_sha256;
};

}  // namespace zarrstream
