// Zarr v3 zarr.json parsing and writing.
//
// Strictness follows the spec's extension rules: a field this parser does not know is an error
// unless the document says it may be ignored ("must_understand": false), because guessing at an
// extension's meaning could return wrong data silently.
#include "metadata/v3_metadata.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "metadata/extended_type.h"
#include "metadata/float16.h"
#include "metadata/metadata_parsing.h"
#include "metadata/v3_fill_value.h"

namespace zarrstream {
namespace {

using nlohmann::json;

constexpr size_t kMaxQuotedKeyLength = 64;

constexpr std::array<std::string_view, 11> kArrayFields = {
    "zarr_format",         "node_type",  "shape",  "data_type",  "chunk_grid",
    "chunk_key_encoding",  "fill_value", "codecs", "attributes", "dimension_names",
    "storage_transformers"};
constexpr std::array<std::string_view, 4> kGroupFields = {"zarr_format", "node_type", "attributes",
                                                          "consolidated_metadata"};

// A key from the document, shortened for use in an error message.
std::string QuotedKey(std::string_view key) {
  if (key.size() <= kMaxQuotedKeyLength) return std::string(key);
  return std::string(key.substr(0, kMaxQuotedKeyLength)) + "...";
}

// ---------------------------------------------------------------------------------------------
// Document structure.

const json* OptionalField(const json& document, std::string_view field) {
  auto it = document.find(std::string(field));
  return it == document.end() ? nullptr : &*it;
}

// Unknown top-level fields are extensions: ignorable only when they say so.
Status CheckExtensionFields(const json& document, std::span<const std::string_view> known) {
  for (const auto& [key, value] : document.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    if (value.is_object()) {
      auto must_understand = value.find("must_understand");
      if (must_understand != value.end() && must_understand->is_boolean() &&
          !must_understand->get<bool>()) {
        continue;
      }
    }
    return FieldError(ErrorCode::kUnsupported, QuotedKey(key),
                      "unknown field; an extension this reader may ignore must be an object with "
                      "\"must_understand\": false");
  }
  return Status::Ok();
}

// An extension point's value: {"name": ..., "configuration": {...}} or the bare name.
struct NamedConfiguration {
  std::string name;
  json configuration = json::object();
};

Result<NamedConfiguration> ParseNamedConfiguration(const json& value, const std::string& field) {
  NamedConfiguration named;
  if (value.is_string()) {
    named.name = value.get<std::string>();
  } else if (value.is_object()) {
    for (const auto& [key, member] : value.items()) {
      if (key == "name") {
        if (!member.is_string()) {
          return FieldError(ErrorCode::kMetadata, field + ".name",
                            "expected a string, got " + DescribeJson(member));
        }
        named.name = member.get<std::string>();
      } else if (key == "configuration") {
        if (!member.is_object()) {
          return FieldError(ErrorCode::kMetadata, field + ".configuration",
                            "expected an object, got " + DescribeJson(member));
        }
        named.configuration = member;
      } else if (key == "must_understand") {
        // Everything reaching the model is understood (or rejected) by a later layer, so
        // the flag changes nothing here; it only has to be well-formed.
        if (!member.is_boolean()) {
          return FieldError(ErrorCode::kMetadata, field + ".must_understand",
                            "expected true or false, got " + DescribeJson(member));
        }
      } else {
        return FieldError(ErrorCode::kMetadata, field, "unexpected key '" + QuotedKey(key) + "'");
      }
    }
    if (!value.contains("name")) {
      return FieldError(ErrorCode::kMetadata, field + ".name", "required but missing");
    }
  } else {
    return FieldError(ErrorCode::kMetadata, field,
                      "expected a name or an object with \"name\", got " + DescribeJson(value));
  }
  if (named.name.empty()) {
    return FieldError(ErrorCode::kMetadata, field + ".name", "must not be empty");
  }
  return named;
}

// Sets metadata->data_type, and extended_type for a type beyond the numeric core.
Status ParseDataTypeField(const json& value, ArrayMetadata* metadata) {
  ZS_ASSIGN_OR_RETURN(NamedConfiguration named, ParseNamedConfiguration(value, "data_type"));
  ZS_ASSIGN_OR_RETURN(metadata->extended_type,
                      ParseV3ExtendedType(named.name, named.configuration));
  if (metadata->extended_type) {
    metadata->data_type = metadata->extended_type->is_time() ? DataType::kInt64 : DataType::kUInt8;
    return Status::Ok();
  }
  Result<DataType> type = ParseDataTypeName(named.name);
  if (!type.ok()) {
    return FieldError(ErrorCode::kUnsupported, "data_type",
                      "unsupported data type " + DescribeJson(json(named.name)));
  }
  if (!named.configuration.empty()) {
    return FieldError(ErrorCode::kUnsupported, "data_type.configuration",
                      "core data type '" + named.name + "' takes no configuration");
  }
  metadata->data_type = *type;
  return Status::Ok();
}

Result<std::vector<uint64_t>> ParseChunkGrid(const json& value) {
  ZS_ASSIGN_OR_RETURN(NamedConfiguration grid, ParseNamedConfiguration(value, "chunk_grid"));
  if (grid.name != "regular") {
    return FieldError(ErrorCode::kUnsupported, "chunk_grid",
                      "unsupported chunk grid " + DescribeJson(json(grid.name)) +
                          " (only \"regular\" is supported)");
  }
  for (const auto& [key, member] : grid.configuration.items()) {
    if (key != "chunk_shape") {
      return FieldError(ErrorCode::kMetadata, "chunk_grid.configuration",
                        "unexpected key '" + QuotedKey(key) + "'");
    }
  }
  const std::string field = "chunk_grid.configuration.chunk_shape";
  ZS_ASSIGN_OR_RETURN(const json* chunk_shape,
                      RequiredField(grid.configuration, "chunk_shape", field));
  return ParseExtents(*chunk_shape, field, /*allow_zero=*/false);
}

Result<ChunkKeyEncoding> ParseChunkKeyEncoding(const json& value) {
  ZS_ASSIGN_OR_RETURN(NamedConfiguration named,
                      ParseNamedConfiguration(value, "chunk_key_encoding"));
  ChunkKeyEncoding encoding;
  // The spec's defaults differ: "/" for "default", "." for "v2" (what v2 stores used).
  if (named.name == "default") {
    encoding = {ChunkKeyEncoding::Kind::kDefault, '/'};
  } else if (named.name == "v2") {
    encoding = {ChunkKeyEncoding::Kind::kV2, '.'};
  } else {
    return FieldError(ErrorCode::kUnsupported, "chunk_key_encoding",
                      "unsupported chunk key encoding " + DescribeJson(json(named.name)));
  }
  for (const auto& [key, member] : named.configuration.items()) {
    if (key != "separator") {
      return FieldError(ErrorCode::kMetadata, "chunk_key_encoding.configuration",
                        "unexpected key '" + QuotedKey(key) + "'");
    }
    if (member != "/" && member != ".") {
      return FieldError(ErrorCode::kMetadata, "chunk_key_encoding.configuration.separator",
                        "expected \"/\" or \".\", got " + DescribeJson(member));
    }
    encoding.separator = member.get_ref<const std::string&>()[0];
  }
  return encoding;
}

Result<std::vector<std::string>> ParseDimensionNames(const json& value, size_t rank) {
  if (value.is_null()) return std::vector<std::string>();
  if (!value.is_array()) {
    return FieldError(ErrorCode::kMetadata, "dimension_names",
                      "expected an array of names, got " + DescribeJson(value));
  }
  if (value.size() != rank) {
    return FieldError(ErrorCode::kMetadata, "dimension_names",
                      "has " + std::to_string(value.size()) + " names but the array has " +
                          std::to_string(rank) + " dimensions");
  }
  std::vector<std::string> names;
  names.reserve(rank);
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i].is_null()) {
      names.emplace_back();
    } else if (value[i].is_string()) {
      names.push_back(value[i].get<std::string>());
    } else {
      return FieldError(ErrorCode::kMetadata, "dimension_names[" + std::to_string(i) + "]",
                        "expected a string or null, got " + DescribeJson(value[i]));
    }
  }
  return names;
}

Result<json> ParseAttributes(const json& document) {
  const json* attributes = OptionalField(document, "attributes");
  if (attributes == nullptr) return json::object();
  if (!attributes->is_object()) {
    return FieldError(ErrorCode::kMetadata, "attributes",
                      "expected an object, got " + DescribeJson(*attributes));
  }
  return *attributes;
}

Result<ArrayMetadata> ParseArray(const json& document) {
  ZS_RETURN_IF_ERROR(CheckExtensionFields(document, kArrayFields));
  ArrayMetadata metadata;
  metadata.zarr_format = 3;

  ZS_ASSIGN_OR_RETURN(const json* shape, RequiredField(document, "shape"));
  ZS_ASSIGN_OR_RETURN(metadata.shape, ParseExtents(*shape, "shape", /*allow_zero=*/true));

  ZS_ASSIGN_OR_RETURN(const json* data_type, RequiredField(document, "data_type"));
  ZS_RETURN_IF_ERROR(ParseDataTypeField(*data_type, &metadata));

  ZS_ASSIGN_OR_RETURN(const json* chunk_grid, RequiredField(document, "chunk_grid"));
  ZS_ASSIGN_OR_RETURN(metadata.chunk_shape, ParseChunkGrid(*chunk_grid));
  ZS_RETURN_IF_ERROR(ValidateRegularGrid(metadata.shape, metadata.chunk_shape, metadata.data_type,
                                         "shape", "chunk_grid.configuration.chunk_shape"));

  ZS_ASSIGN_OR_RETURN(const json* key_encoding, RequiredField(document, "chunk_key_encoding"));
  ZS_ASSIGN_OR_RETURN(metadata.chunk_key_encoding, ParseChunkKeyEncoding(*key_encoding));

  ZS_ASSIGN_OR_RETURN(const json* fill_value, RequiredField(document, "fill_value"));
  if (metadata.extended_type) {
    ZS_RETURN_IF_ERROR(ParseExtendedFillValue(*fill_value, &metadata));
  } else {
    ZS_ASSIGN_OR_RETURN(metadata.fill_value, ParseV3FillValue(*fill_value, metadata.data_type));
  }

  ZS_ASSIGN_OR_RETURN(const json* codecs, RequiredField(document, "codecs"));
  ZS_ASSIGN_OR_RETURN(metadata.codecs, ParseV3Codecs(*codecs, "codecs"));

  if (const json* names = OptionalField(document, "dimension_names")) {
    ZS_ASSIGN_OR_RETURN(metadata.dimension_names,
                        ParseDimensionNames(*names, metadata.shape.size()));
  }
  ZS_ASSIGN_OR_RETURN(metadata.attributes, ParseAttributes(document));

  if (const json* transformers = OptionalField(document, "storage_transformers")) {
    if (!transformers->is_array()) {
      return FieldError(ErrorCode::kMetadata, "storage_transformers",
                        "expected an array, got " + DescribeJson(*transformers));
    }
    if (!transformers->empty()) {
      const json& first = (*transformers)[0];
      std::string name = first.is_object() && first.contains("name") ? DescribeJson(first["name"])
                                                                     : DescribeJson(first);
      return FieldError(ErrorCode::kUnsupported, "storage_transformers",
                        "storage transformers are not supported (found " + name + ")");
    }
  }
  return metadata;
}

Result<NodeMetadata> ParseNode(const json& document);

Result<std::shared_ptr<const ConsolidatedMetadata>> ParseConsolidatedMetadata(const json& value) {
  const std::string field = "consolidated_metadata";
  if (value.is_null()) return std::shared_ptr<const ConsolidatedMetadata>();
  if (!value.is_object()) {
    return FieldError(ErrorCode::kMetadata, field,
                      "expected an object or null, got " + DescribeJson(value));
  }
  for (const auto& [key, member] : value.items()) {
    if (key != "kind" && key != "must_understand" && key != "metadata") {
      return FieldError(ErrorCode::kMetadata, field, "unexpected key '" + QuotedKey(key) + "'");
    }
  }
  ZS_ASSIGN_OR_RETURN(const json* kind, RequiredField(value, "kind", field + ".kind"));
  if (!kind->is_string()) {
    return FieldError(ErrorCode::kMetadata, field + ".kind",
                      "expected a string, got " + DescribeJson(*kind));
  }
  if (*kind != "inline") {
    return FieldError(ErrorCode::kUnsupported, field + ".kind",
                      "unsupported kind " + DescribeJson(*kind) + " (only \"inline\")");
  }
  const json* must_understand = OptionalField(value, "must_understand");
  if (must_understand != nullptr && !must_understand->is_boolean()) {
    return FieldError(ErrorCode::kMetadata, field + ".must_understand",
                      "expected true or false, got " + DescribeJson(*must_understand));
  }
  ZS_ASSIGN_OR_RETURN(const json* entries, RequiredField(value, "metadata", field + ".metadata"));
  if (!entries->is_object()) {
    return FieldError(ErrorCode::kMetadata, field + ".metadata",
                      "expected an object, got " + DescribeJson(*entries));
  }
  auto nodes = std::make_shared<ConsolidatedMetadata>();
  for (const auto& [path, node_json] : entries->items()) {
    const std::string entry_field = field + ".metadata[\"" + QuotedKey(path) + "\"]";
    ZS_RETURN_IF_ERROR(ValidateNodePath(path, entry_field));
    Result<NodeMetadata> node = ParseNode(node_json);
    if (!node.ok() && node.status().code() == ErrorCode::kUnsupported && node_json.is_object() &&
        node_json.contains("node_type") && node_json["node_type"] == "array") {
      // Well-formed but unsupported (a data type, a chunk grid): listed, and opening it is the
      // error, so that its siblings stay readable.
      ArrayMetadata unsupported;
      unsupported.unsupported = node.status();
      unsupported.unsupported_document = node_json;
      nodes->emplace(path, std::move(unsupported));
      continue;
    }
    if (!node.ok()) return node.status().WithContext("field '" + entry_field + "'");
    nodes->emplace(path, std::move(node).value());
  }
  // zarr-python writes the entries flat and gives each subgroup an empty "metadata" of its own;
  // give subgroups their part of the flat map instead, as zarr-python does when reading.
  AttachSubgroupConsolidatedMetadata(nodes.get());
  return std::shared_ptr<const ConsolidatedMetadata>(std::move(nodes));
}

Result<GroupMetadata> ParseGroup(const json& document) {
  ZS_RETURN_IF_ERROR(CheckExtensionFields(document, kGroupFields));
  GroupMetadata group;
  group.zarr_format = 3;
  ZS_ASSIGN_OR_RETURN(group.attributes, ParseAttributes(document));
  if (const json* consolidated = OptionalField(document, "consolidated_metadata")) {
    ZS_ASSIGN_OR_RETURN(group.consolidated, ParseConsolidatedMetadata(*consolidated));
  }
  return group;
}

Result<NodeMetadata> ParseNode(const json& document) {
  if (!document.is_object()) {
    return MetadataError("expected a JSON object, got " + DescribeJson(document));
  }
  ZS_RETURN_IF_ERROR(CheckFormatVersion(document, "zarr_format", 3));
  ZS_ASSIGN_OR_RETURN(const json* node_type, RequiredField(document, "node_type"));
  if (*node_type == "array") {
    ZS_ASSIGN_OR_RETURN(ArrayMetadata array, ParseArray(document));
    return NodeMetadata(std::move(array));
  }
  if (*node_type == "group") {
    ZS_ASSIGN_OR_RETURN(GroupMetadata group, ParseGroup(document));
    return NodeMetadata(std::move(group));
  }
  return FieldError(ErrorCode::kMetadata, "node_type",
                    "expected \"array\" or \"group\", got " + DescribeJson(*node_type));
}

}  // namespace

Result<NodeMetadata> ParseV3Metadata(std::string_view zarr_json) {
  ZS_ASSIGN_OR_RETURN(json document, ParseJsonDocument(zarr_json, "zarr.json"));
  // The parser checks every type before reading a value; this only keeps a missed check from
  // turning into an exception escaping a noexcept-minded caller.
  try {
    return ParseNode(document);
  } catch (const json::exception& e) {
    return MetadataError(std::string("malformed zarr.json: ") + e.what());
  }
}

json ArrayMetadataToV3Json(const ArrayMetadata& metadata) {
  json document = json::object();
  document["zarr_format"] = 3;
  document["node_type"] = "array";
  document["shape"] = metadata.shape;
  document["data_type"] = metadata.extended_type ? ExtendedTypeToV3Json(*metadata.extended_type)
                                                 : json(DataTypeName(metadata.data_type));
  document["chunk_grid"] = {{"name", "regular"},
                            {"configuration", {{"chunk_shape", metadata.chunk_shape}}}};
  const bool v2_keys = metadata.chunk_key_encoding.kind == ChunkKeyEncoding::Kind::kV2;
  document["chunk_key_encoding"] = {
      {"name", v2_keys ? "v2" : "default"},
      {"configuration", {{"separator", std::string(1, metadata.chunk_key_encoding.separator)}}}};
  // v3 has no null fill value; the model's bytes (zeros for a v2 null) say what missing chunks
  // hold.
  document["fill_value"] = metadata.extended_type
                               ? ExtendedFillValueToJson(metadata)
                               : FillValueToJson(metadata.fill_value, metadata.data_type);
  json codecs = json::array();
  for (const CodecSpec& codec : metadata.codecs) {
    json entry = {{"name", codec.name}};
    // zarr-python omits an empty configuration ({"name": "crc32c"}); do the same.
    if (!codec.configuration.is_null() && !codec.configuration.empty()) {
      entry["configuration"] = codec.configuration;
    }
    codecs.push_back(std::move(entry));
  }
  document["codecs"] = std::move(codecs);
  document["attributes"] = metadata.attributes.is_object() ? metadata.attributes : json::object();
  if (!metadata.dimension_names.empty()) {
    json names = json::array();
    for (const std::string& name : metadata.dimension_names) {
      names.push_back(name.empty() ? json(nullptr) : json(name));
    }
    document["dimension_names"] = std::move(names);
  }
  return document;
}

json GroupMetadataToV3Json(const GroupMetadata& metadata) {
  json document = json::object();
  document["zarr_format"] = 3;
  document["node_type"] = "group";
  document["attributes"] = metadata.attributes.is_object() ? metadata.attributes : json::object();
  if (metadata.consolidated) {
    json nodes = json::object();
    for (const auto& [path, node] : *metadata.consolidated) {
      if (const auto* array = std::get_if<ArrayMetadata>(&node)) {
        // An unsupported member was not parsed: its document goes back as it came.
        nodes[path] =
            array->unsupported ? array->unsupported_document : ArrayMetadataToV3Json(*array);
      } else {
        GroupMetadata member = std::get<GroupMetadata>(node);
        // A member's own sub-tree is already in the flat map; zarr-python writes it empty here.
        member.consolidated = std::make_shared<const ConsolidatedMetadata>();
        nodes[path] = GroupMetadataToV3Json(member);
      }
    }
    document["consolidated_metadata"] = {
        {"kind", "inline"}, {"must_understand", false}, {"metadata", std::move(nodes)}};
  }
  return document;
}

Result<std::vector<CodecSpec>> ParseV3Codecs(const nlohmann::json& value, std::string_view field) {
  if (!value.is_array() || value.empty()) {
    return FieldError(ErrorCode::kMetadata, field,
                      "expected a non-empty array of codecs, got " + DescribeJson(value));
  }
  std::vector<CodecSpec> codecs;
  codecs.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    ZS_ASSIGN_OR_RETURN(
        NamedConfiguration named,
        ParseNamedConfiguration(value[i], std::string(field) + "[" + std::to_string(i) + "]"));
    codecs.push_back({std::move(named.name), std::move(named.configuration)});
  }
  return codecs;
}

}  // namespace zarrstream
