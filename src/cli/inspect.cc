// `zarrstream inspect URL [--json]`: the tree of groups and arrays of a store, with shapes,
// chunking, codecs, stored vs logical bytes, CF encoding (packing, fill values, units, the decoded
// time range of time coordinates), and the layout findings and rechunk command `doctor` gives
// (one set of rules: tools/store_advice.h).
#include "cli/inspect.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "array/array_state.h"
#include "dataset/cf_decoding.h"
#include "dataset/cf_time.h"
#include "dataset/channel_spec.h"
#include "gpu/gpu_decoder.h"
#include "store/icechunk_store.h"
#include "store/store.h"
#include "store/store_registry.h"
#include "tools/store_advice.h"
#include "util/format.h"
#include "zarrstream/array.h"
#include "zarrstream/loader.h"

namespace zarrstream::cli {

namespace {

using nlohmann::json;

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

// One element of a numeric array as a double (time coordinates: integers or floats).
Result<double> ReadNumber(const Array& array, uint64_t index) {
  std::array<std::byte, 8> bytes{};
  const uint64_t start[1] = {index}, shape[1] = {1};
  ZS_RETURN_IF_ERROR(array.Read(start, shape, bytes.data()));
  auto as = [&bytes]<typename T>(T) {
    T v;
    std::memcpy(&v, bytes.data(), sizeof v);
    return static_cast<double>(v);
  };
  switch (array.dtype()) {
    case DataType::kInt8:
      return as(int8_t{});
    case DataType::kInt16:
      return as(int16_t{});
    case DataType::kInt32:
      return as(int32_t{});
    case DataType::kInt64:
      return as(int64_t{});
    case DataType::kUInt8:
      return as(uint8_t{});
    case DataType::kUInt16:
      return as(uint16_t{});
    case DataType::kUInt32:
      return as(uint32_t{});
    case DataType::kUInt64:
      return as(uint64_t{});
    case DataType::kFloat32:
      return as(float{});
    case DataType::kFloat64:
      return as(double{});
    default:
      return UnsupportedError("not a number type");
  }
}

// The first and last dates of a 1-D time coordinate with CF units ("hours since 1900-01-01"), as
// the loader's label selection reads them; null when it is not one.
json TimeRange(const Array& array, const json& attributes) {
  const std::string units = attributes.value("units", json()).is_string()
                                ? attributes["units"].get<std::string>()
                                : std::string();
  if (array.rank() != 1 || array.shape()[0] == 0 || units.find(" since ") == std::string::npos) {
    return nullptr;
  }
  const std::string calendar = attributes.value("calendar", json()).is_string()
                                   ? attributes["calendar"].get<std::string>()
                                   : std::string("standard");
  auto parsed = CfTimeUnits::Parse(units, calendar);
  if (!parsed.ok()) return nullptr;
  json range = json::array();
  for (uint64_t index : {uint64_t{0}, array.shape()[0] - 1}) {
    auto value = ReadNumber(array, index);
    if (!value.ok()) return nullptr;
    auto date = parsed->Decode(*value);
    if (!date.ok()) return nullptr;
    range.push_back(FormatDateTime(*date));
  }
  return range;
}

// CF encoding: what the loader's decoding does to the array (dataset/cf_decoding.h), its
// _FillValue and missing_value, units; a corrupt attribute is a warning here (and the
// loader's error).
void DescribeCf(const Array& array, const json& attributes, json& j, json& warnings) {
  j["units"] = attributes.value("units", json());
  // In Zarr v2 the array's fill_value is the _FillValue (xarray's reading, and the loader's).
  j["_FillValue"] = array.zarr_format() == 2 && !array.fill_value_is_null()
                        ? json::parse(array.metadata_json()).value("fill_value", json())
                        : attributes.value("_FillValue", json());
  j["missing_value"] = attributes.value("missing_value", json());
  j["time_range"] = TimeRange(array, attributes);
  auto cf = CfDecodingOf(array);
  if (!cf.ok()) {
    warnings.push_back(cf.status().message());
    j["packed"] = false;
    j["cf_decoding"] = nullptr;
    return;
  }
  j["packed"] = cf->decode && cf->packed();
  const std::string decoding = DescribeCfDecoding(*cf, array.dtype());
  j["cf_decoding"] = decoding.empty() ? json(nullptr) : json(decoding);
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

  j["chunk_bytes"] = static_cast<double>(Product(array.chunks()) * item);
  json warnings = json::array(), notes = json::array();
  if (!numeric) {
    // Coordinates and labels: no CF decoding, and what the layout advice says of training data
    // does not apply. The fields are there all the same (null), as for every array.
    for (const char* field : {"units", "_FillValue", "missing_value", "time_range", "cf_decoding"})
      j[field] = nullptr;
    j["packed"] = false;
    j["warnings"] = json::array({extended->Name() +
                                 " values are read on the CPU only (open_array); "
                                 "they label or select, and are not loader or GPU channels"});
    j["notes"] = notes;
    return j;
  }
  DescribeCf(array, json::parse(array.attributes_json()), j, warnings);
  const bool gpu = GpuBatchesUnavailableReason().empty();
  for (const json& finding : tools::ArrayFindings(array, gpu)) {
    (finding["severity"] == "warning" ? warnings : notes).push_back(finding["message"]);
  }
  j["warnings"] = warnings;
  j["notes"] = notes;
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
  if (!node["cf_decoding"].is_null()) {
    out << indent << "    CF: " << node["cf_decoding"].get<std::string>()
        << (node["packed"].get<bool>() ? " (packed; decode_cf=False reads it as stored)" : "")
        << "\n";
  }
  if (node["units"].is_string() || !node["_FillValue"].is_null() || !node["time_range"].is_null()) {
    out << indent << "   ";
    if (node["units"].is_string()) out << " units " << node["units"].get<std::string>() << ";";
    if (!node["_FillValue"].is_null()) out << " _FillValue " << node["_FillValue"].dump() << ";";
    if (!node["time_range"].is_null()) {
      out << " from " << node["time_range"][0].get<std::string>() << " to "
          << node["time_range"][1].get<std::string>() << ";";
    }
    out << "\n";
  }
  for (const auto& w : node["warnings"])
    out << indent << "    warning: " << w.get<std::string>() << "\n";
  for (const auto& n : node["notes"]) out << indent << "    note: " << n.get<std::string>() << "\n";
}

// The Icechunk snapshot `url` and `ref` open, for the report; null when `url` holds no repository.
Result<json> IcechunkSnapshot(const std::string& url, const std::string& ref) {
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, OpenStore(url));
  ZS_ASSIGN_OR_RETURN(bool repository, IcechunkStore::IsRepository(*store));
  if (!repository) return json(nullptr);
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<IcechunkStore> snapshot, IcechunkStore::Open(store, ref));
  const IcechunkStore::SnapshotInfo& info = snapshot->snapshot();
  const std::time_t seconds = static_cast<std::time_t>(info.flushed_at_us / 1'000'000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char committed[32];
  std::strftime(committed, sizeof(committed), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return json{{"spec_version", info.spec_version},
              {"ref", info.ref},
              {"ref_kind", info.ref_kind},
              {"snapshot_id", info.id},
              {"parent_id", info.parent_id.empty() ? json(nullptr) : json(info.parent_id)},
              {"committed", committed},
              {"message", info.message}};
}

}  // namespace

int RunInspect(const InspectOptions& options) {
  std::vector<std::string> errors;
  json tree;
  OpenOptions open;
  open.ref = options.ref;
  auto group = Group::Open(options.url, open);
  bool unfinished_rechunk = false;  // the destination of a rechunk not finished (docs/rechunk.md)
  if (group.ok()) {
    tree = DescribeGroup(*group, "", &errors);
    unfinished_rechunk = IsUnfinishedRechunk(group->state().metadata.attributes);
  } else {
    auto array = Array::Open(options.url, open);
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
    unfinished_rechunk = IsUnfinishedRechunk(array->state().metadata.attributes);
  }
  tree["url"] = options.url;
  tree["unfinished_rechunk"] = unfinished_rechunk;
  if (Result<json> snapshot = IcechunkSnapshot(options.url, options.ref); !snapshot.ok()) {
    errors.push_back(snapshot.status().message());
  } else if (!snapshot->is_null()) {
    tree["icechunk"] = *snapshot;
  }
  // The store's rechunk command, as `doctor URL` prints it (null when the layout suits).
  auto advice = tools::StoreAdvice(options.url);
  tree["rechunk_command"] = advice.ok() ? (*advice)["rechunk_command"] : json(nullptr);
  if (options.json) {
    std::cout << tree.dump(2) << "\n";
    for (const auto& e : errors) std::cerr << "error: " << e << "\n";
  } else {
    std::cout << options.url << "\n";
    if (tree.contains("icechunk")) {
      const json& ic = tree["icechunk"];
      std::cout << "Icechunk repository (spec " << ic["spec_version"].get<int>()
                << "): " << ic["ref_kind"].get<std::string>() << " '"
                << ic["ref"].get<std::string>() << "' at snapshot "
                << ic["snapshot_id"].get<std::string>() << ", committed "
                << ic["committed"].get<std::string>() << ": " << ic["message"].dump() << "\n";
    }
    if (unfinished_rechunk) {
      std::cout << "warning: the destination of a `zarrstream rechunk` job that has not finished: "
                   "chunks not yet written read as fill values, and the loader refuses it until "
                   "the job finishes (rerun the same command to resume it)\n";
    }
    PrintNode(tree, "", std::cout);
    if (!tree["rechunk_command"].is_null()) {
      std::cout << "fix: " << tree["rechunk_command"].get<std::string>() << "\n";
    }
    for (const auto& e : errors) std::cout << "error: " << e << "\n";
  }
  return errors.empty() ? 0 : 1;
}

}  // namespace zarrstream::cli
