// Resolving a rechunk's sources: variables, coordinates, label selections, stacking.
#include "tools/rechunk_sources.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>

#include "dataset/channel_spec.h"
#include "dataset/coordinates.h"
#include "util/base64.h"
#include "zarrstream/label_selection.h"

namespace zarrstream::tools {
namespace {

using nlohmann::json;

// Index ranges [begin, end) per dimension name, from the label selections.
using DimRanges = std::map<std::string, std::pair<uint64_t, uint64_t>>;

template <typename T>
T LoadNative(std::span<const std::byte> bytes, size_t offset = 0) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

double HalfToDouble(uint16_t half) {
  const double sign = (half & 0x8000) ? -1.0 : 1.0;
  const int exponent = (half >> 10) & 0x1F;
  const int mantissa = half & 0x3FF;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) {
    return mantissa ? std::copysign(std::numeric_limits<double>::quiet_NaN(), sign)
                    : sign * std::numeric_limits<double>::infinity();
  }
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// xarray's FillValueCoder.encode: a float as base64 of its little-endian float64 bytes.
std::string EncodedFloat(double value) {
  char bytes[8];
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((bits >> (8 * i)) & 0xFF);
  return EncodeBase64(std::string_view(bytes, sizeof(bytes)));
}

// `fill` (the array's fill value, native bytes of `type`) as xarray writes a `_FillValue`
// attribute into v3 metadata; null for types it has no encoding for here.
json XarrayFillValue(DataType type, std::span<const std::byte> fill) {
  if (fill.size() != DataTypeSize(type)) return nullptr;
  switch (type) {
    case DataType::kBool:
      return fill[0] != std::byte{0};
    case DataType::kInt8:
      return LoadNative<int8_t>(fill);
    case DataType::kInt16:
      return LoadNative<int16_t>(fill);
    case DataType::kInt32:
      return LoadNative<int32_t>(fill);
    case DataType::kInt64:
      return LoadNative<int64_t>(fill);
    case DataType::kUInt8:
      return LoadNative<uint8_t>(fill);
    case DataType::kUInt16:
      return LoadNative<uint16_t>(fill);
    case DataType::kUInt32:
      return LoadNative<uint32_t>(fill);
    case DataType::kUInt64:
      return LoadNative<uint64_t>(fill);
    case DataType::kFloat16:
      return EncodedFloat(HalfToDouble(LoadNative<uint16_t>(fill)));
    case DataType::kFloat32:
      return EncodedFloat(LoadNative<float>(fill));
    case DataType::kFloat64:
      return EncodedFloat(LoadNative<double>(fill));
    case DataType::kComplex64:
      return json::array({EncodedFloat(LoadNative<float>(fill)),
                          EncodedFloat(LoadNative<float>(fill, sizeof(float)))});
    case DataType::kComplex128:
      return json::array({EncodedFloat(LoadNative<double>(fill)),
                          EncodedFloat(LoadNative<double>(fill, sizeof(double)))});
    default:
      return nullptr;
  }
}

// The array's attributes as the v3 copy needs them for xarray to decode it as it decodes the
// source: without v2's _ARRAY_DIMENSIONS (v3 metadata carries the names), and with a v2 array's
// fill value as the `_FillValue` attribute. xarray masks the cells of a v2 array equal to its
// fill_value (netCDF's _FillValue convention; it writes _FillValue there), but reads a v3 array's
// _FillValue from the attributes only, as its FillValueCoder encodes it (floats as base64 of the
// float64, so that NaN survives JSON). v3 sources keep their attributes as they are.
std::string CopiedAttributes(const Array& array) {
  json attributes = json::parse(array.attributes_json(), nullptr, /*allow_exceptions=*/false);
  if (!attributes.is_object()) attributes = json::object();
  attributes.erase("_ARRAY_DIMENSIONS");
  // (A text or time array's fill value stays its v3 fill_value, as zarr-python reads it.)
  if (array.zarr_format() == 2 && !array.fill_value_is_null() && !array.extended_type()) {
    json fill = XarrayFillValue(array.dtype(), array.fill_value());
    if (!fill.is_null()) attributes["_FillValue"] = std::move(fill);
  }
  return attributes.dump();
}

std::string FillValueJson(const Array& array) {
  if (array.fill_value_is_null()) return "null";
  json metadata = json::parse(array.metadata_json(), nullptr, /*allow_exceptions=*/false);
  if (!metadata.is_object() || !metadata.contains("fill_value")) return "null";
  return metadata["fill_value"].dump();
}

// An output array that copies `array` (restricted to `ranges` along its named dimensions).
OutputArraySource PlainCopy(const std::string& path, const Array& array, const DimRanges& ranges) {
  OutputArraySource out;
  out.path = path;
  out.dims = array.dims();
  out.shape = array.shape();
  out.dtype = array.dtype();
  out.default_chunks = array.chunks();
  out.fill_value_json = FillValueJson(array);
  out.attributes_json = CopiedAttributes(array);
  ChannelSource source{array, {}, std::vector<uint64_t>(array.rank(), 0)};
  for (size_t d = 0; d < array.rank(); ++d) {
    source.out_dim.push_back(static_cast<int>(d));
    if (d < out.dims.size()) {
      auto it = ranges.find(out.dims[d]);
      if (it != ranges.end()) {
        source.offset[d] = it->second.first;
        out.shape[d] = it->second.second - it->second.first;
      }
    }
  }
  out.channels.push_back(std::move(source));
  return out;
}

// A copy of `array` (an extended type; restricted to `ranges` along its named dimensions).
ExtendedArrayCopy ExtendedCopy(const std::string& path, const Array& array,
                               const DimRanges& ranges) {
  ExtendedArrayCopy copy{path, array, std::vector<uint64_t>(array.rank(), 0), array.shape(),
                         CopiedAttributes(array)};
  for (size_t d = 0; d < array.rank() && d < array.dims().size(); ++d) {
    auto it = ranges.find(array.dims()[d]);
    if (it != ranges.end()) {
      copy.start[d] = it->second.first;
      copy.shape[d] = it->second.second - it->second.first;
    }
  }
  return copy;
}

Result<DimRanges> ResolveSelections(const Group& group,
                                    const std::vector<std::string>& selections) {
  DimRanges ranges;
  ZS_ASSIGN_OR_RETURN(std::vector<LabelSelection> parsed, ParseLabelSelections(selections));
  for (const auto& selection : parsed) {
    ZS_ASSIGN_OR_RETURN(Coordinate coordinate, Coordinate::Load(group, selection.dim));
    ZS_ASSIGN_OR_RETURN(std::vector<uint64_t> indices, coordinate.Select(selection));
    if (indices.empty()) {
      return InvalidArgumentError("--select " + selection.ToString() + " selects nothing");
    }
    // A copy keeps a contiguous run of the source: a range, or labels that are adjacent.
    for (size_t i = 1; i < indices.size(); ++i) {
      if (indices[i] != indices[i - 1] + 1) {
        return InvalidArgumentError("--select " + selection.ToString() +
                                    " picks labels that are not adjacent along '" + selection.dim +
                                    "'; rechunk copies a contiguous range");
      }
    }
    ranges[selection.dim] = {indices.front(), indices.back() + 1};
  }
  return ranges;
}

}  // namespace

uint64_t OutputArraySource::source_chunk_extent(size_t d) const {
  uint64_t extent = 1;
  for (const auto& channel : channels) {
    const std::vector<uint64_t> chunks = channel.array.chunks();
    for (size_t j = 0; j < channel.out_dim.size(); ++j) {
      // The channel dimension of a stacked array is fed by the sources' level dimensions.
      const int k = channel.out_dim[j] < 0 ? channel_dim : channel.out_dim[j];
      if (k == static_cast<int>(d)) extent = std::max(extent, chunks[j]);
    }
  }
  return extent;
}

namespace {

// The stacked (time, channel, ...) array of `specs`: one source per channel, its level (if any)
// fixed, the selection applied.
Result<OutputArraySource> StackChannels(const Dataset& dataset, const std::string& name,
                                        std::span<const VariableSpec> specs,
                                        const DimRanges& ranges) {
  ZS_ASSIGN_OR_RETURN(std::vector<Channel> channels, dataset.ResolveChannels(specs));
  if (channels.empty()) return InvalidArgumentError("--stack needs at least one variable");
  for (const Channel& c : channels) {
    if (c.broadcast) {
      return InvalidArgumentError("--stack: '" + c.name + "' of " + dataset.url() +
                                  " has no time dimension: a static field cannot be stacked with "
                                  "time-dependent channels");
    }
  }
  OutputArraySource out;
  out.path = name;
  const Channel& first = channels.front();
  // The channel dimension goes right after time (first when there is no time dimension), so a
  // time step's channels are one contiguous block: what a training read fetches.
  size_t channel_pos = 0;
  for (size_t d = 0; d < first.dims.size(); ++d) {
    if (IsTimeDimension(first.dims[d])) channel_pos = d + 1;
  }
  out.dims = first.dims;
  out.shape = first.shape;
  for (size_t d = 0; d < out.dims.size(); ++d) {
    auto it = ranges.find(out.dims[d]);
    if (it != ranges.end()) out.shape[d] = it->second.second - it->second.first;
  }
  out.dims.insert(out.dims.begin() + static_cast<std::ptrdiff_t>(channel_pos), "channel");
  out.shape.insert(out.shape.begin() + static_cast<std::ptrdiff_t>(channel_pos), channels.size());
  out.channel_dim = static_cast<int>(channel_pos);
  out.dtype = first.array.dtype();
  out.fill_value_json = FillValueJson(first.array);
  json names = json::array();
  for (const auto& channel : channels) {
    if (channel.array.dtype() != out.dtype) {
      return InvalidArgumentError("--stack: channel " + channel.name + " is " +
                                  std::string(DataTypeName(channel.array.dtype())) + " but " +
                                  first.name + " is " + std::string(DataTypeName(out.dtype)) +
                                  "; stacked channels share one data type");
    }
    names.push_back(channel.name);
    ChannelSource source{channel.array, {}, std::vector<uint64_t>(channel.array.rank(), 0)};
    size_t k = 0;  // index into the channel's dims (the array's dims without its level)
    for (size_t j = 0; j < channel.array.rank(); ++j) {
      if (channel.level_dim && *channel.level_dim == j) {
        source.out_dim.push_back(-1);
        source.offset[j] = channel.level_index;
        continue;
      }
      source.out_dim.push_back(static_cast<int>(k < channel_pos ? k : k + 1));
      auto it = ranges.find(channel.dims[k]);
      if (it != ranges.end()) source.offset[j] = it->second.first;
      ++k;
    }
    out.channels.push_back(std::move(source));
  }
  out.attributes_json = json{{"channel_names", names}}.dump();
  out.channel_names = std::move(names);
  // One time step of one channel per chunk unless --chunks says otherwise: a training read's unit.
  out.default_chunks = out.shape;
  for (size_t d = 0; d < out.dims.size(); ++d) {
    if (static_cast<int>(d) == out.channel_dim || IsTimeDimension(out.dims[d])) {
      out.default_chunks[d] = 1;
    }
  }
  return out;
}

}  // namespace

Result<SourceLayout> ResolveSources(const RechunkOptions& options) {
  OpenOptions open;
  open.num_threads = options.threads;
  open.ref = options.source_ref;
  ZS_ASSIGN_OR_RETURN(Dataset dataset, Dataset::Open(options.source_url, open));
  ZS_ASSIGN_OR_RETURN(std::vector<VariableSpec> specs, ParseVariableSpecs(options.variables));
  SourceLayout layout;
  if (dataset.is_combined()) {
    return InvalidArgumentError("rechunk copies one store; " + dataset.url() +
                                " combines several: rechunk each of them");
  }
  if (!dataset.group()) {
    if (!options.selections.empty() || !options.stack_name.empty() || !specs.empty()) {
      return InvalidArgumentError(
          options.source_url +
          " is a single array: --select, --vars and --stack need a group (a dataset whose "
          "coordinates and variables they name)");
    }
    ZS_ASSIGN_OR_RETURN(Array array, Array::Open(options.source_url, open));
    layout.is_group = false;
    if (array.extended_type()) {
      layout.extended_copies.push_back(ExtendedCopy("", array, {}));
    } else {
      layout.outputs.push_back(PlainCopy("", array, {}));
    }
    return layout;
  }
  const Group& group = *dataset.group();
  json group_attributes = json::parse(group.attributes_json(), nullptr, false);
  if (!group_attributes.is_object()) group_attributes = json::object();
  // How the source is stored (zarrstream synth writes it): the copy is stored otherwise.
  group_attributes.erase("layout");
  layout.group_attributes_json = group_attributes.dump();
  ZS_ASSIGN_OR_RETURN(DimRanges ranges, ResolveSelections(group, options.selections));

  std::vector<OutputArraySource> data_outputs;
  if (!options.stack_name.empty()) {
    ZS_ASSIGN_OR_RETURN(OutputArraySource stacked,
                        StackChannels(dataset, options.stack_name, specs, ranges));
    data_outputs.push_back(std::move(stacked));
  } else {
    std::vector<std::string> names;
    for (const auto& spec : specs) {
      if (spec.levels != VariableSpec::Levels::kUnspecified) {
        return InvalidArgumentError("--vars " + spec.ToString() +
                                    ": picking levels with '@' needs --stack (without it, "
                                    "select a level range with --select level=lo:hi)");
      }
      names.push_back(spec.variable);
    }
    if (names.empty()) names = dataset.variable_names();
    for (const auto& name : names) {
      ZS_ASSIGN_OR_RETURN(Array array, dataset.OpenVariable(name));
      data_outputs.push_back(PlainCopy(name, array, ranges));
    }
  }

  // The other arrays (dimension coordinates, and auxiliary coordinates such as 2-D latitudes)
  // whose dimensions are all used by the outputs, selected the same way.
  std::set<std::string> dims_used;
  for (const auto& out : data_outputs) dims_used.insert(out.dims.begin(), out.dims.end());
  const auto& variables = dataset.variable_names();
  for (const auto& name : group.array_names()) {
    if (std::find(variables.begin(), variables.end(), name) != variables.end()) continue;
    Result<Array> opened = group.OpenArray(name);
    if (!opened.ok() && opened.status().code() == ErrorCode::kUnsupported) {
      // A type nobody here reads: the rest of the group is still worth copying.
      layout.skipped.push_back(name + ": " + opened.status().message());
      continue;
    }
    ZS_ASSIGN_OR_RETURN(Array array, std::move(opened));
    // Scalars (ERA5's `number`) are copied as they are; other arrays when the outputs keep all
    // their dimensions.
    const auto& dims = array.dims();
    if ((dims.empty() && array.rank() > 0) ||
        !std::all_of(dims.begin(), dims.end(),
                     [&](const std::string& d) { return dims_used.count(d); })) {
      continue;
    }
    if (array.extended_type()) {
      if (std::string why = WhyNotWritableInV3(*array.extended_type()); !why.empty()) {
        layout.skipped.push_back(name + ": ");
        layout.skipped.back() += why;
        continue;
      }
      layout.extended_copies.push_back(ExtendedCopy(name, array, ranges));
      continue;
    }
    OutputArraySource out = PlainCopy(name, array, ranges);
    out.is_coordinate = true;
    layout.outputs.push_back(std::move(out));
  }
  for (auto& out : data_outputs) layout.outputs.push_back(std::move(out));
  return layout;
}

}  // namespace zarrstream::tools
