#include "loader/read_plan.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "dataset/stats_file.h"
#include "util/format.h"

namespace zarrstream {

namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    if (!out.empty()) out += ", ";
    out += "'";
    out += name;
    out += "'";
  }
  return out;
}

// The array dimension of channel dimension `d` (the channel's level dimension is removed from
// its dims).
size_t ArrayDim(const Channel& channel, size_t d) {
  return channel.level_dim && d >= *channel.level_dim ? d + 1 : d;
}

Result<std::vector<Channel>> Resolve(const Dataset& dataset, const std::vector<std::string>& args) {
  ZS_ASSIGN_OR_RETURN(std::vector<VariableSpec> specs, ParseVariableSpecs(args));
  return dataset.ResolveChannels(specs);
}

bool SupportedSource(DataType type) {
#if !defined(__FLT16_MANT_DIG__)
  if (type == DataType::kFloat16) return false;  // batch_assembly.cc needs the compiler's _Float16
#endif
  return IsFloatingPoint(type) || IsSignedInteger(type) || IsUnsignedInteger(type);
}

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return NotFoundError("cannot open the stats file '" + path + "'");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

Status MissingStatsError(const std::string& stats_path, const std::string& channel,
                         const std::vector<std::string>& available) {
  return InvalidArgumentError("the stats file '" + stats_path + "' has no channel '" + channel +
                              "' (it has " + JoinNames(available) + ")");
}

Status UndefinedStatsError(const std::string& stats_path, const std::string& channel) {
  return InvalidArgumentError("the stats file '" + stats_path + "' gives channel '" + channel +
                              "' no finite mean and std: it cannot normalise it");
}

Status SetNormalisation(const std::string& stats_path, LoaderGeometry& g) {
  g.mean.assign(g.channels.size(), 0.0);
  g.inv_std.assign(g.channels.size(), 1.0);
  if (stats_path.empty()) return Status::Ok();
  ZS_ASSIGN_OR_RETURN(std::string text, ReadTextFile(stats_path));
  auto stats = ParseChannelStats(text);
  if (!stats.ok()) {
    return std::move(stats).status().WithContext("reading the stats file '" + stats_path + "'");
  }
  std::map<std::string, const ChannelStats*> by_name;
  std::vector<std::string> available;
  for (const ChannelStats& c : stats->channels) {
    by_name[c.name] = &c;
    available.push_back(c.name);
  }
  for (size_t c = 0; c < g.channels.size(); ++c) {
    const std::string& name = g.channels[c].name;
    auto it = by_name.find(name);
    if (it == by_name.end()) return MissingStatsError(stats_path, name, available);
    const ChannelStats& s = *it->second;
    if (!std::isfinite(s.mean) || !std::isfinite(s.std))
      return UndefinedStatsError(stats_path, name);
    g.mean[c] = s.mean;
    g.inv_std[c] = s.std > 0 ? 1.0 / s.std : 1.0;
  }
  return Status::Ok();
}

}  // namespace

std::vector<SampledDim> LoaderGeometry::PlanDims() const {
  std::vector<SampledDim> out;
  const Channel& first = channels.front();
  const std::vector<uint64_t> chunks = first.array.chunks();
  for (size_t d : sampled_index) {
    SampledDim s;
    s.name = dims[d];
    s.range = ranges[d];
    s.window = window[d];
    s.stride = stride[d];
    s.reach = time_dim && *time_dim == d && !target_steps.empty()
                  ? *std::max_element(target_steps.begin(), target_steps.end()) + 1 - time_window
                  : 0;
    s.chunk = chunks[ArrayDim(first, d)];
    out.push_back(std::move(s));
  }
  return out;
}

Result<LoaderGeometry> MakeLoaderGeometry(const Dataset& dataset, const LoaderOptions& options) {
  LoaderGeometry g;
  const std::string where = "dataset " + dataset.url();

  // Channels: variables, then forcings; targets default to the variables.
  std::vector<std::string> variables = options.variables;
  if (variables.empty()) {
    ZS_ASSIGN_OR_RETURN(std::vector<VariableSpec> forcing_specs,
                        ParseVariableSpecs(options.forcings));
    // Every data variable but the forcings; where some vary in time, the static fields
    // (orography, land-sea mask) stay out unless named: they have no time step to stack.
    std::vector<std::string> timeless;
    for (const std::string& name : dataset.variable_names()) {
      bool forcing = std::any_of(forcing_specs.begin(), forcing_specs.end(),
                                 [&](const VariableSpec& f) { return f.variable == name; });
      if (forcing) continue;
      ZS_ASSIGN_OR_RETURN(Array array, dataset.OpenVariable(name));
      const bool timed = std::any_of(array.dims().begin(), array.dims().end(), &IsTimeDimension);
      (timed ? variables : timeless).push_back(name);
    }
    if (variables.empty()) variables = std::move(timeless);
  }
  std::vector<std::string> inputs = variables;
  inputs.insert(inputs.end(), options.forcings.begin(), options.forcings.end());
  ZS_ASSIGN_OR_RETURN(std::vector<Channel> input_channels, Resolve(dataset, inputs));
  std::vector<Channel> target_channels;
  if (!options.target_dim.empty()) {
    ZS_ASSIGN_OR_RETURN(
        target_channels,
        Resolve(dataset, options.target_variables.empty() ? variables : options.target_variables));
  } else if (!options.target_variables.empty() || !options.target_offsets.empty()) {
    return InvalidArgumentError(
        "target variables or offsets need a target dimension "
        "(target_offset={\"time\": 1})");
  }
  if (input_channels.empty()) return InvalidArgumentError(where + " has no data variables");
  for (const Channel& t : target_channels) {
    const Channel& first = input_channels.front();
    if (t.dims != first.dims || t.shape != first.shape) {
      return InvalidArgumentError("target channel '" + t.name + "' has dimensions " +
                                  JoinNames(t.dims) + " " + FormatIndex(t.shape) +
                                  ", the input channels " + JoinNames(first.dims) + " " +
                                  FormatIndex(first.shape));
    }
  }
  g.num_inputs = input_channels.size();
  g.channels = std::move(input_channels);
  g.channels.insert(g.channels.end(), target_channels.begin(), target_channels.end());
  std::vector<std::string> array_names;
  std::vector<Array> handles;
  for (size_t c = 0; c < g.channels.size(); ++c) {
    const Channel& ch = g.channels[c];
    (c < g.num_inputs ? g.input_names : g.target_names).push_back(ch.name);
    if (ch.array.rank() > kLoaderMaxRank) {
      return UnsupportedError("channel '" + ch.name + "': " + ch.array.state().Describe() +
                              " has " + std::to_string(ch.array.rank()) +
                              " dimensions; the loader reads at most " +
                              std::to_string(kLoaderMaxRank));
    }
    if (!SupportedSource(ch.array.dtype())) {
      return UnsupportedError("channel '" + ch.name + "': " + ch.array.state().Describe() +
                              " holds " + std::string(DataTypeName(ch.array.dtype())) +
                              "; the loader reads integer and floating-point arrays");
    }
    // Channels of one array (levels; an input that is also a target) share its chunks: one
    // handle per array name, so the read plan deduplicates them.
    auto it = std::find(array_names.begin(), array_names.end(), ch.array_name);
    g.channel_array.push_back(static_cast<size_t>(it - array_names.begin()));
    if (it == array_names.end()) {
      array_names.push_back(ch.array_name);
      g.arrays.push_back(&ch.array.state());
      handles.push_back(ch.array);
    } else {
      g.channels[c].array = handles[g.channel_array.back()];
    }
  }

  // Dimensions and selections.
  const Channel& first = g.channels.front();
  g.dims = first.dims;
  const size_t rank = g.dims.size();
  g.ranges.resize(rank);
  for (size_t d = 0; d < rank; ++d) g.ranges[d] = IndexRange{0, first.shape[d]};
  auto dim_index = [&](const std::string& name, std::string_view what) -> Result<size_t> {
    auto it = std::find(g.dims.begin(), g.dims.end(), name);
    if (it != g.dims.end()) return static_cast<size_t>(it - g.dims.begin());
    if (IsLevelDimension(name) || name == "channel") {
      return InvalidArgumentError(std::string(what) + " '" + name +
                                  "': levels and channels are chosen with the variables "
                                  "(\"temperature@500,850\")");
    }
    return NotFoundError(std::string(what) + " '" + name +
                         "' is not a dimension of the channels (" + JoinNames(g.dims) + ") of " +
                         where);
  };
  ZS_ASSIGN_OR_RETURN(std::vector<LabelSelection> selections, ParseLabelSelections(options.select));
  for (const LabelSelection& selection : selections) {
    ZS_ASSIGN_OR_RETURN(size_t d, dim_index(selection.dim, "selection of"));
    ZS_ASSIGN_OR_RETURN(Coordinate coordinate, dataset.LoadCoordinate(selection.dim));
    ZS_ASSIGN_OR_RETURN(std::vector<uint64_t> indices, coordinate.Select(selection));
    for (size_t i = 1; i < indices.size(); ++i) {
      if (indices[i] != indices[i - 1] + 1) {
        return InvalidArgumentError("selection '" + selection.ToString() + "' of " +
                                    coordinate.Describe() +
                                    " picks indices that are not one run; the loader samples "
                                    "a contiguous range");
      }
    }
    g.ranges[d] = IndexRange{indices.front(), indices.back() + 1};
  }

  // Sampled dimensions, windows and strides.
  g.sampled.assign(rank, 0);
  g.window.resize(rank);
  g.stride.resize(rank);
  for (size_t d = 0; d < rank; ++d) g.window[d] = g.ranges[d].size();
  for (size_t d = 0; d < rank && !g.time_dim; ++d) {
    if (IsTimeDimension(g.dims[d])) g.time_dim = d;
  }
  if (g.time_dim) {
    g.sampled[*g.time_dim] = 1;
    g.window[*g.time_dim] = 1;
  }
  for (const auto& [name, window] : options.sample) {
    ZS_ASSIGN_OR_RETURN(size_t d, dim_index(name, "sample dimension"));
    if (window == 0) return InvalidArgumentError("sample window along '" + name + "' is 0");
    g.sampled[d] = 1;
    g.window[d] = window;
  }
  for (size_t d = 0; d < rank; ++d) g.stride[d] = g.window[d];
  for (const auto& [name, stride] : options.stride) {
    ZS_ASSIGN_OR_RETURN(size_t d, dim_index(name, "stride dimension"));
    if (!g.sampled[d]) {
      return InvalidArgumentError("stride along '" + name +
                                  "', which is not sampled: give it a window in `sample`");
    }
    if (stride == 0) return InvalidArgumentError("stride along '" + name + "' is 0");
    g.stride[d] = stride;
  }
  for (size_t d = 0; d < rank; ++d) {
    if (g.window[d] > g.ranges[d].size()) {
      return InvalidArgumentError("sample window " + std::to_string(g.window[d]) + " along '" +
                                  g.dims[d] + "' is larger than its " +
                                  std::to_string(g.ranges[d].size()) + " selected indices in " +
                                  where);
    }
  }
  g.time_window = g.time_dim ? g.window[*g.time_dim] : 1;

  // Targets.
  if (!options.target_dim.empty()) {
    if (!g.time_dim || g.dims[*g.time_dim] != options.target_dim) {
      return InvalidArgumentError(
          "target offsets along '" + options.target_dim + "': targets are offsets along the " +
          (g.time_dim ? "time dimension '" + g.dims[*g.time_dim] + "'"
                      : std::string("time dimension, and the channels have none")));
    }
    if (options.target_offsets.empty()) {
      return InvalidArgumentError("a target dimension without target offsets");
    }
    uint64_t reach = 0;
    for (uint64_t offset : options.target_offsets) {
      g.target_steps.push_back(g.time_window - 1 + offset);
      reach = std::max(reach, offset);
    }
    const IndexRange& r = g.ranges[*g.time_dim];
    if (g.time_window + reach > r.size()) {
      return InvalidArgumentError("target offset " + std::to_string(reach) + " after a window of " +
                                  std::to_string(g.time_window) + " along '" + options.target_dim +
                                  "' reaches past the " + std::to_string(r.size()) +
                                  " selected steps of " + where);
    }
  }

  for (size_t d = 0; d < rank; ++d) {
    if (g.sampled[d]) {
      g.sample_dims.push_back(g.dims[d]);
      g.sampled_index.push_back(d);
    }
    if (g.time_dim && *g.time_dim == d) continue;
    g.spatial_dims.push_back(g.dims[d]);
    g.spatial_index.push_back(d);
    g.spatial_shape.push_back(g.window[d]);
    g.slab_elements *= g.window[d];
  }

  // Output channels: time-major inputs, lead-major targets.
  const auto num_targets = static_cast<uint32_t>(g.channels.size() - g.num_inputs);
  for (uint64_t t = 0; t < g.time_window; ++t) {
    for (size_t c = 0; c < g.num_inputs; ++c) {
      g.input_slabs.push_back(
          Slab{c, t, static_cast<uint32_t>(t * g.num_inputs + c), /*target=*/false});
    }
  }
  for (size_t j = 0; j < g.target_steps.size(); ++j) {
    for (uint32_t c = 0; c < num_targets; ++c) {
      g.target_slabs.push_back(Slab{g.num_inputs + c, g.target_steps[j],
                                    static_cast<uint32_t>(j * num_targets + c), /*target=*/true});
    }
  }
  ZS_RETURN_IF_ERROR(SetNormalisation(options.normalize, g));
  return g;
}

BatchReadPlan PlanBatchReads(const LoaderGeometry& g, const SampleBatch& batch) {
  BatchReadPlan plan;
  // (array, linear chunk index) → position in plan.chunks.
  std::vector<std::unordered_map<uint64_t, uint32_t>> index(g.arrays.size());
  const size_t rank = g.dims.size();
  DimArray start{};  // the sample's first index along each channel dimension

  auto add_slab = [&](uint32_t sample, uint32_t slab_index, const Slab& slab) {
    const Channel& channel = g.channels[slab.channel];
    const internal::ArrayState& array = channel.array.state();
    const size_t array_rank = array.metadata.shape.size();
    const std::vector<uint64_t>& chunk = array.read_chunk_shape;
    const std::vector<uint64_t>& shape = array.metadata.shape;
    DimArray lo{}, extent{}, first{}, count{};
    for (size_t d = 0; d < rank; ++d) {
      const size_t a = ArrayDim(channel, d);
      const bool is_time = g.time_dim && *g.time_dim == d;
      lo[a] = start[d] + (is_time ? slab.step : 0);
      extent[a] = is_time ? 1 : g.window[d];
    }
    if (channel.level_dim) {
      lo[*channel.level_dim] = channel.level_index;
      extent[*channel.level_dim] = 1;
    }
    uint64_t cells = 1;
    for (size_t a = 0; a < array_rank; ++a) {
      first[a] = lo[a] / chunk[a];
      count[a] = (lo[a] + extent[a] - 1) / chunk[a] - first[a] + 1;
      cells *= count[a];
    }
    const size_t array_slot = g.channel_array[slab.channel];
    for (uint64_t cell = 0; cell < cells; ++cell) {
      DimArray coords{};
      uint64_t rest = cell;
      for (size_t a = array_rank; a-- > 0;) {
        coords[a] = first[a] + rest % count[a];
        rest /= count[a];
      }
      uint64_t linear = 0;
      PlannedCopy copy;
      copy.sample = sample;
      copy.slab = slab_index;
      copy.target = slab.target;
      copy.rank = static_cast<uint8_t>(array_rank);
      uint64_t elements = 1;
      for (size_t a = 0; a < array_rank; ++a) {
        const uint64_t grid = (shape[a] + chunk[a] - 1) / chunk[a];
        linear = linear * grid + coords[a];
        const uint64_t chunk_lo = coords[a] * chunk[a];
        const uint64_t box_lo = std::max(chunk_lo, lo[a]);
        const uint64_t box_hi = std::min(chunk_lo + chunk[a], lo[a] + extent[a]);
        copy.within_chunk[a] = box_lo - chunk_lo;
        copy.within_slab[a] = box_lo - lo[a];
        copy.shape[a] = box_hi - box_lo;
        elements *= copy.shape[a];
      }
      auto [it, inserted] =
          index[array_slot].try_emplace(linear, static_cast<uint32_t>(plan.chunks.size()));
      if (inserted) {
        PlannedChunk planned;
        planned.array = array_slot;
        planned.coords.assign(coords.begin(), coords.begin() + array_rank);
        planned.linear = linear;
        plan.chunks.push_back(std::move(planned));
      }
      plan.chunks[it->second].copies.push_back(copy);
      ++plan.chunk_refs;
      plan.bytes_used += elements * DataTypeSize(array.metadata.data_type);
    }
  };

  for (size_t s = 0; s < batch.size(); ++s) {
    std::span<const uint64_t> origin = batch.origin(s);
    for (size_t d = 0; d < rank; ++d) start[d] = g.ranges[d].start;
    for (size_t k = 0; k < g.sampled_index.size(); ++k) start[g.sampled_index[k]] = origin[k];
    const auto sample = static_cast<uint32_t>(s);
    for (size_t i = 0; i < g.input_slabs.size(); ++i) {
      add_slab(sample, static_cast<uint32_t>(i), g.input_slabs[i]);
    }
    for (size_t i = 0; i < g.target_slabs.size(); ++i) {
      add_slab(sample, static_cast<uint32_t>(i), g.target_slabs[i]);
    }
  }
  return plan;
}

uint64_t AutoBlockChunks(const LoaderGeometry& g, const std::vector<SampledDim>& dims,
                         const LoaderOptions& options, uint64_t cache_bytes) {
  constexpr uint64_t kMaxBlockChunks = 8;
  const uint64_t window = std::max<uint64_t>(options.block_window, 1);
  uint64_t chosen = 1;
  if (options.device == BatchDevice::kCuda) {
    for (uint64_t chunks = 2; chunks <= kMaxBlockChunks; ++chunks) {
      // A block spans at least one stride (SamplePlan), and holds one origin per stride.
      uint64_t group_samples = window;
      for (const SampledDim& dim : dims) {
        const uint64_t stride = std::max<uint64_t>(dim.stride.value_or(dim.window), 1);
        const uint64_t span = std::max(chunks, (stride + dim.chunk - 1) / dim.chunk) * dim.chunk;
        group_samples *= (span + stride - 1) / stride;
      }
      if (group_samples > options.batch_size) break;
      chosen = chunks;
    }
    return chosen;
  }
  // A block of S chunks along a dimension of chunk extent c spans S·c + footprint - 1 indices,
  // where footprint is the window plus the target reach; one sample's decoded bytes cover
  // `footprint` of them. One sample's distinct fields: (channel source, step) pairs of its inputs
  // and targets.
  std::set<std::tuple<const internal::ArrayState*, uint64_t, uint64_t>> fields;
  uint64_t sample_bytes = 0;
  for (const std::vector<Slab>* slabs : {&g.input_slabs, &g.target_slabs}) {
    for (const Slab& slab : *slabs) {
      const Channel& channel = g.channels[slab.channel];
      const internal::ArrayState* array = g.arrays[g.channel_array[slab.channel]];
      if (fields.emplace(array, channel.level_index, slab.step).second) {
        sample_bytes += g.slab_elements * DataTypeSize(array->metadata.data_type);
      }
    }
  }
  const double budget = 0.75 * static_cast<double>(cache_bytes);
  for (uint64_t chunks = 2; chunks <= kMaxBlockChunks; ++chunks) {
    double block_bytes = static_cast<double>(sample_bytes);
    for (const SampledDim& dim : dims) {
      const uint64_t footprint = dim.window + dim.reach;
      block_bytes *=
          static_cast<double>(chunks * dim.chunk + footprint - 1) / static_cast<double>(footprint);
    }
    if (static_cast<double>(window) * block_bytes > budget) break;
    chosen = chunks;
  }
  return chosen;
}

}  // namespace zarrstream
