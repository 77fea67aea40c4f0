// `zarrstream inspect URL [--json]`: the tree of groups and arrays of a store, with shapes,
// chunking, codecs, stored vs logical bytes, and warnings about layouts that read poorly for ML
// training.
#include "cli/inspect.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "array/array_state.h"
#include "gpu/gpu_decoder.h"
#include "store/store.h"
#include "util/format.h"
#include "zarrstream/array.h"

namespace zarrstream::cli {

namespace {

using nlohmann::json;

constexpr double kLargeChunkBytes = 100e6;
constexpr double kSmallChunkBytes = 1e6;

std::string ShapeString(const std::vector<uint64_t>& shape) {
  std::string s = FormatIndex(shape, ", ");
  if (shape.size() == 1) s.insert(s.size() - 1, ",");
  return s;
}

uint64_t Product(const std::vector<uint64_t>& v) {
  uint64_t p = 1;
  for (uint64_t x : v) p *= x;
  return p;
}

// Codec names of a chain, descending into sharding's inner codecs ("sharding_indexed[bytes,zstd]").
void CollectCodecs(const json& chain, std::vector<std::string>* names) {
  for (const auto& codec : chain) {
    const std::string name = codec.value("name", "");
    const json config = codec.value("configuration", json::object());
    if (name == "sharding_indexed") {
      CollectCodecs(config.value("codecs", json::array()), names);
      continue;
    }
    std::string label = name;
    if (name == "blosc" && config.contains("cname"))
      label += "/" + config["cname"].get<std::string>();
    if (name == "zstd" && config.contains("level")) label += "(" + config["level"].dump() + ")";
    names->push_back(label);
  }
}

bool IsTimeDimension(const std::string& name) {
  return name == "time" || name == "valid_time" || name == "init_time" || name == "t";
}

json DescribeArray(const Array& array, const std::string& name) {
  json j;
  j["name"] = name;
  j["kind"] = "array";
  j["path"] = array.path();
  j["zarr_format"] = array.zarr_format();
  j["shape"] = array.shape();
  const bool numeric = array.is_numeric();
  j["dtype"] = numeric ? std::string(DataTypeName(array.dtype())) : array.extended_type()->Name();
  j["dims"] = array.dims().empty() ? json(nullptr) : json(array.dims());
  j["chunks"] = array.chunks();
  j["shard_shape"] = array.shard_shape() ? json(*array.shard_shape()) : json(nullptr);
  json codecs = json::parse(array.codecs_json());
  j["codecs"] = codecs;
  std::vector<std::string> codec_names;
  CollectCodecs(codecs, &codec_names);
  j["codec_summary"] = codec_names;
  const auto& state = array.state();
  // Text arrays have no numeric chain: their chunks decode on the CPU only.
  const GpuDecodePlan decode =
      state.chain ? PlanGpuDecode(*state.chain) : GpuDecodePlan{std::nullopt, "text: CPU only"};
  j["gpu_decodable"] = numeric && decode.gpu();
  j["gpu_decode"] = decode.description;

  // Variable-length elements have no fixed size: their logical bytes are unknown (0).
  const std::optional<ExtendedType>& extended = array.extended_type();
  const uint64_t item =
      !extended || extended->is_time() ? DataTypeSize(array.dtype()) : extended->length_bytes;
  const uint64_t logical = array.num_elements() * item;
  const uint64_t grid_objects = Product(array.grid_shape());
  uint64_t stored_objects = 0, stored_bytes = 0;
  auto keys = state.store->List(state.path);
  if (keys.ok()) {
    for (const KeyInfo& k : *keys) {
      std::string_view base = k.key;
      base = base.substr(base.rfind('/') == std::string_view::npos ? 0 : base.rfind('/') + 1);
      if (base == "zarr.json" || base == ".zarray" || base == ".zattrs" || base == ".zgroup")
        continue;
      ++stored_objects;
      stored_bytes += k.size;
    }
  }
  j["chunk_count"] = grid_objects;
  j["stored_chunk_count"] = stored_objects;
  j["logical_bytes"] = logical;
  j["stored_bytes"] = stored_bytes;
  j["compression_ratio"] = stored_bytes ? static_cast<double>(logical) / stored_bytes : 0.0;

  json warnings = json::array();
  const double chunk_bytes = static_cast<double>(Product(array.chunks()) * item);
  j["chunk_bytes"] = chunk_bytes;
  if (!numeric) {
    // Coordinates and labels: what the layout warnings say of training data does not apply.
    j["warnings"] = json::array({extended->Name() +
                                 " values are read on the CPU only (open_array); "
                                 "they label or select, and are not loader or GPU channels"});
    return j;
  }
  if (chunk_bytes > kLargeChunkBytes) {
    warnings.push_back("chunks of " + FormatBytes(chunk_bytes) +
                       " are large: every sample that touches one reads and decodes all of it");
  } else if (chunk_bytes < kSmallChunkBytes && logical > 10 * kSmallChunkBytes) {
    warnings.push_back("chunks of " + FormatBytes(chunk_bytes) +
                       " are small: a sample needs many requests (aim for 1-100 MB)");
  }
  for (size_t d = 0; d < array.dims().size(); ++d) {
    if (IsTimeDimension(array.dims()[d]) && array.chunks()[d] > 1 && array.shape()[d] > 1) {
      warnings.push_back("each chunk holds " + std::to_string(array.chunks()[d]) + " steps of '" +
                         array.dims()[d] +
                         "': reading one step reads all of them "
                         "(rechunk to " +
                         array.dims()[d] + "=1 for random time-step sampling)");
    }
  }
  if (!decode.gpu()) {
    warnings.push_back("the GPU path cannot decode these chunks (" + decode.description +
                       "): the CPU decodes them");
  }
  j["warnings"] = warnings;
  return j;
}

json DescribeGroup(const Group& group, const std::string& name, std::vector<std::string>* errors) {
  json j;
  j["name"] = name;
  j["kind"] = "group";
  j["path"] = group.path();
  j["zarr_format"] = group.zarr_format();
  j["consolidated"] = group.consolidated();
  j["attributes"] = json::parse(group.attributes_json());
  json members = json::array();
  for (const std::string& member : group.group_names()) {
    auto sub = group.OpenGroup(member);
    if (!sub.ok()) {
      errors->push_back(sub.status().message());
      members.push_back({{"name", member}, {"kind", "group"}, {"error", sub.status().message()}});
      continue;
    }
    members.push_back(DescribeGroup(*sub, member, errors));
  }
  for (const std::string& member : group.array_names()) {
    auto array = group.OpenArray(member);
    if (!array.ok() && array.status().code() == ErrorCode::kUnsupported) {
      // Valid metadata of something this reader does not support: listed with why and skipped,
      // not an error of the store.
      members.push_back(
          {{"name", member}, {"kind", "array"}, {"skipped", array.status().message()}});
      continue;
    }
    if (!array.ok()) {
      errors->push_back(array.status().message());
      members.push_back({{"name", member}, {"kind", "array"}, {"error", array.status().message()}});
      continue;
    }
    members.push_back(DescribeArray(*array, member));
  }
  j["members"] = members;
  return j;
}

void PrintNode(const json& node, const std::string& indent, std::ostream& out) {
  if (node["kind"] == "group" && node.contains("error")) {
    out << indent << node["name"].get<std::string>()
        << "/  ERROR: " << node["error"].get<std::string>() << "\n";
    return;
  }
  if (node["kind"] == "group") {
    out << indent
        << (node["name"].get<std::string>().empty() ? "/" : node["name"].get<std::string>() + "/")
        << "  (group, zarr v" << node["zarr_format"].get<int>()
        << (node["consolidated"].get<bool>() ? ", consolidated" : "") << ")\n";
    for (const auto& member : node["members"]) PrintNode(member, indent + "  ", out);
    return;
  }
  const std::string name = node["name"].get<std::string>();
  out << indent << (name.empty() ? "/" : name);
  if (node.contains("error")) {
    out << "  ERROR: " << node["error"].get<std::string>() << "\n";
    return;
  }
  if (node.contains("skipped")) {
    out << "  skipped: " << node["skipped"].get<std::string>() << "\n";
    return;
  }
  std::vector<uint64_t> shape = node["shape"], chunks = node["chunks"];
  out << "  " << node["dtype"].get<std::string>() << " " << ShapeString(shape);
  if (!node["dims"].is_null()) {
    out << " dims=(";
    bool first = true;
    for (const auto& d : node["dims"]) {
      out << (first ? "" : ", ") << d.get<std::string>();
      first = false;
    }
    out << ")";
  }
  out << "\n" << indent << "    chunks " << ShapeString(chunks);
  if (!node["shard_shape"].is_null()) {
    out << " in shards " << ShapeString(node["shard_shape"].get<std::vector<uint64_t>>());
  }
  out << " (" << FormatBytes(node["chunk_bytes"].get<double>()) << " each), codecs ";
  bool first = true;
  for (const auto& c : node["codec_summary"]) {
    out << (first ? "" : " > ") << c.get<std::string>();
    first = false;
  }
  out << "\n"
      << indent << "    " << node["stored_chunk_count"].get<uint64_t>() << " of "
      << node["chunk_count"].get<uint64_t>() << " "
      << (node["shard_shape"].is_null() ? "chunks" : "shards") << " stored, "
      << FormatBytes(node["stored_bytes"].get<double>()) << " stored / "
      << FormatBytes(node["logical_bytes"].get<double>()) << " logical";
  if (node["compression_ratio"].get<double>() > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), " (%.2fx)", node["compression_ratio"].get<double>());
    out << ratio;
  }
  out << "\n";
  if (node["gpu_decodable"].get<bool>()) {
    out << indent << "    GPU-decodable: " << node["gpu_decode"].get<std::string>() << "\n";
  }
  for (const auto& w : node["warnings"])
    out << indent << "    warning: " << w.get<std::string>() << "\n";
}

}  // namespace

int RunInspect(const InspectOptions& options) {
  std::vector<std::string> errors;
  json tree;
  auto group = Group::Open(options.url);
  if (group.ok()) {
    tree = DescribeGroup(*group, "", &errors);
  } else {
    auto array = Array::Open(options.url);
    if (!array.ok()) {
      // Report the more specific failure: a group URL that is really an array gives the array's.
      Status s =
          group.status().code() == ErrorCode::kInvalidArgument ? array.status() : group.status();
      if (group.status().code() == ErrorCode::kNotFound &&
          array.status().code() != ErrorCode::kNotFound &&
          array.status().code() != ErrorCode::kInvalidArgument) {
        s = array.status();
      }
      std::cerr << "zarrstream inspect: " << s.message() << "\n";
      return 1;
    }
    tree = DescribeArray(*array, "");
  }
  tree["url"] = options.url;
  if (options.json) {
    std::cout << tree.dump(2) << "\n";
    for (const auto& e : errors) std::cerr << "error: " << e << "\n";
  } else {
    std::cout << options.url << "\n";
    PrintNode(tree, "", std::cout);
    for (const auto& e : errors) std::cout << "error: " << e << "\n";
  }
  return errors.empty() ? 0 : 1;
}

}  // namespace zarrstream::cli
