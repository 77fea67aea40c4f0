#include "metadata/metadata_parsing.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "util/checked_size.h"

namespace zarrstream {
namespace {

using nlohmann::json;

constexpr size_t kMaxDescribedStringLength = 64;

std::optional<uint64_t> AsUInt64(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return std::nullopt;
}

}  // namespace

Status CheckFormatVersion(const json& document, std::string_view field, int expected) {
  auto it = document.find(std::string(field));
  if (it == document.end()) return FieldError(ErrorCode::kMetadata, field, "required but missing");
  if (!it->is_number_integer()) {
    return FieldError(
        ErrorCode::kMetadata, field,
        "expected the integer " + std::to_string(expected) + ", got " + DescribeJson(*it));
  }
  if (AsUInt64(*it) != static_cast<uint64_t>(expected)) {
    return FieldError(ErrorCode::kUnsupported, field,
                      "expected " + std::to_string(expected) + ", got " + DescribeJson(*it));
  }
  return Status::Ok();
}

Status FieldError(ErrorCode code, std::string_view field, std::string_view message) {
  std::string m = "field '";
  m.append(field).append("': ").append(message);
  return Status(code, std::move(m));
}

Result<const json*> RequiredField(const json& object, std::string_view key,
                                  std::string_view field) {
  auto it = object.find(std::string(key));
  if (it == object.end()) {
    return FieldError(ErrorCode::kMetadata, field.empty() ? key : field, "required but missing");
  }
  return &*it;
}

std::string DescribeJson(const json& value) {
  switch (value.type()) {
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::string: {
      // The replace handler keeps dump() from throwing on invalid UTF-8 in a hand-built value.
      std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
      if (s.size() > kMaxDescribedStringLength) s = s.substr(0, kMaxDescribedStringLength) + "...";
      return s;
    }
    case json::value_t::null:
    case json::value_t::boolean:
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return value.dump();
    default:
      return "an unexpected value";
  }
}

Result<std::vector<uint64_t>> ParseExtents(const json& value, std::string_view field,
                                           bool allow_zero) {
  if (!value.is_array()) {
    return FieldError(ErrorCode::kMetadata, field,
                      "expected an array of integers, got " + DescribeJson(value));
  }
  std::vector<uint64_t> extents;
  extents.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    std::string element_field = std::string(field) + "[" + std::to_string(i) + "]";
    std::optional<uint64_t> extent = AsUInt64(value[i]);
    if (!extent) {
      return FieldError(ErrorCode::kMetadata, element_field,
                        "expected a non-negative integer, got " + DescribeJson(value[i]));
    }
    if (*extent == 0 && !allow_zero) {
      return FieldError(ErrorCode::kMetadata, element_field, "must be positive, got 0");
    }
    extents.push_back(*extent);
  }
  return extents;
}

Status ValidateRegularGrid(const std::vector<uint64_t>& shape,
                           const std::vector<uint64_t>& chunk_shape, DataType data_type,
                           std::string_view shape_field, std::string_view chunk_field) {
  if (chunk_shape.size() != shape.size()) {
    return FieldError(ErrorCode::kMetadata, chunk_field,
                      "has " + std::to_string(chunk_shape.size()) + " dimensions but '" +
                          std::string(shape_field) + "' has " + std::to_string(shape.size()));
  }
  if (std::find(shape.begin(), shape.end(), 0) == shape.end() && !CheckedProduct(shape)) {
    return FieldError(ErrorCode::kUnsupported, shape_field, "has 2^64 or more elements");
  }
  if (!CheckedProduct(chunk_shape, DataTypeSize(data_type))) {
    return FieldError(ErrorCode::kUnsupported, chunk_field, "a chunk has 2^64 or more bytes");
  }
  return Status::Ok();
}

Status ValidateNodePath(std::string_view path, std::string_view field) {
  auto invalid = [&](std::string_view why) {
    return FieldError(
        ErrorCode::kMetadata, field,
        "invalid node path " + DescribeJson(json(std::string(path))) + ": " + std::string(why));
  };
  if (path.empty()) return invalid("empty");
  int depth = 0;
  size_t start = 0;
  while (true) {
    size_t end = path.find('/', start);
    std::string_view segment =
        path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (segment.empty()) return invalid("empty path segment");
    if (segment == "." || segment == "..") return invalid("'.' and '..' are not allowed");
    if (++depth > kMaxNodePathDepth) {
      return FieldError(ErrorCode::kUnsupported, field,
                        "node path deeper than " + std::to_string(kMaxNodePathDepth) + " levels");
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return Status::Ok();
}

void AttachSubgroupConsolidatedMetadata(ConsolidatedMetadata* nodes) {
  std::vector<std::string> groups;
  for (const auto& [path, node] : *nodes) {
    if (!path.empty() && std::holds_alternative<GroupMetadata>(node)) groups.push_back(path);
  }
  // Deepest first: a group's copy of a subgroup then already carries the subgroup's own map.
  auto depth = [](const std::string& p) { return std::count(p.begin(), p.end(), '/'); };
  std::stable_sort(groups.begin(), groups.end(),
                   [&](const std::string& a, const std::string& b) { return depth(a) > depth(b); });
  for (const std::string& group : groups) {
    auto below = std::make_shared<ConsolidatedMetadata>();
    const std::string prefix = group + "/";
    // Keys sharing a prefix are contiguous in the map's order, starting at the prefix itself.
    for (auto it = nodes->lower_bound(prefix);
         it != nodes->end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      below->emplace(it->first.substr(prefix.size()), it->second);
    }
    std::get<GroupMetadata>(nodes->at(group)).consolidated = std::move(below);
  }
}

}  // namespace zarrstream
