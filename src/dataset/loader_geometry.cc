// MakeLoaderGeometry in steps, in the order the loader's options depend on each other: channels
// (variables, forcings, targets) and their arrays, then the dimensions' selections, sampling and
// target steps, then the batch layout and normalisation. Each step checks what it can get wrong,
// so errors come in the order a user fixes them.
#include "dataset/loader_geometry.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "array/array_state.h"
#include "dataset/cf_decoding.h"
#include "dataset/cf_time.h"
#include "dataset/missing_dates.h"
#include "dataset/stats_file.h"
#include "util/format.h"
#include "zarrstream/label_selection.h"

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

// The ensemble's member dimension the options ask for: LoaderOptions::ensemble_dim, or the one
// dimension of the dataset named as a member dimension; "" without LoaderOptions::ensemble.
Result<std::string> MemberDimension(const Dataset& dataset, const LoaderOptions& options,
                                    const std::string& where) {
  const std::vector<std::string> dims = dataset.dimension_names();
  if (options.ensemble == EnsembleMode::kNone) {
    if (!options.ensemble_dim.empty()) {
      return ConfigError("ensemble_dim '" + options.ensemble_dim +
                         "' without an ensemble mode: pass ensemble=\"sample\" or \"channels\"");
    }
    return std::string();
  }
  if (!options.ensemble_dim.empty()) {
    if (std::find(dims.begin(), dims.end(), options.ensemble_dim) == dims.end()) {
      return NotFoundError("ensemble dimension '" + options.ensemble_dim +
                           "' is not a dimension of " + where + " (" + JoinNames(dims) + ")");
    }
    if (IsTimeDimension(options.ensemble_dim) || IsLevelDimension(options.ensemble_dim)) {
      return ConfigError("ensemble dimension '" + options.ensemble_dim +
                         "' is a time or level dimension, not an ensemble's members");
    }
    return options.ensemble_dim;
  }
  std::vector<std::string> found;
  std::copy_if(dims.begin(), dims.end(), std::back_inserter(found), &IsMemberDimension);
  if (found.size() != 1) {
    return ConfigError(
        "ensemble=\"" + std::string(EnsembleModeName(options.ensemble)) + "\": " + where +
        (found.empty() ? " has no member dimension (number, member, ensemble, realization)"
                       : " has several member dimensions (" + JoinNames(found) + ")") +
        ": name it with ensemble_dim");
  }
  return found.front();
}

// `channels` with their members stacked (EnsembleMode::kChannels): each channel with dimension
// `member_dim` becomes one channel per member, variable-major, named after the member
// coordinate's label (its index without a coordinate).
std::vector<Channel> StackMembers(const Dataset& dataset, const std::string& member_dim,
                                  std::vector<Channel> channels) {
  std::vector<Channel> stacked;
  Result<Coordinate> labels = dataset.LoadCoordinate(member_dim);
  for (Channel& channel : channels) {
    const std::vector<std::string>& array_dims = channel.array.dims();
    const auto it = std::find(array_dims.begin(), array_dims.end(), member_dim);
    if (it == array_dims.end()) {
      stacked.push_back(std::move(channel));
      continue;
    }
    const auto array_dim = static_cast<size_t>(it - array_dims.begin());
    const uint64_t members = channel.array.shape()[array_dim];
    const bool labelled =
        labels.ok() && !labels->is_time() && !labels->is_text() && labels->size() == members;
    const auto channel_dim = std::find(channel.dims.begin(), channel.dims.end(), member_dim);
    const auto erased = channel_dim - channel.dims.begin();
    channel.dims.erase(channel_dim);
    channel.shape.erase(channel.shape.begin() + erased);
    channel.member_dim = array_dim;
    for (uint64_t m = 0; m < members; ++m) {
      Channel member = channel;
      member.member_index = m;
      member.name += "#" + (labelled ? labels->FormatLabel(m) : std::to_string(m));
      stacked.push_back(std::move(member));
    }
  }
  return stacked;
}

Result<std::vector<Channel>> Resolve(const Dataset& dataset, const std::vector<std::string>& args,
                                     const LoaderOptions& options, const std::string& member_dim) {
  ZS_ASSIGN_OR_RETURN(std::vector<VariableSpec> specs, ParseVariableSpecs(args));
  ZS_ASSIGN_OR_RETURN(std::vector<Channel> channels, dataset.ResolveChannels(specs, member_dim));
  if (options.ensemble != EnsembleMode::kChannels) return channels;
  return StackMembers(dataset, member_dim, std::move(channels));
}

bool SupportedSource(DataType type) {
#if !defined(__FLT16_MANT_DIG__)
  if (type == DataType::kFloat16) return false;  // batch_assembly.cc needs the compiler's _Float16
#endif
  return IsFloatingPoint(type) || IsSignedInteger(type) || IsUnsignedInteger(type);
}

// The stats file, opened by path. Only a regular file is read: a named pipe would block the
// open for ever, and a device (/dev/zero) or /proc file never ends. The type is checked on the
// opened file, opened non-blocking for that; a stats file is a few kB per channel, so anything
// over kMaxStatsFileBytes is refused before it is read.
constexpr uint64_t kMaxStatsFileBytes = uint64_t{256} << 20;

Result<std::string> ReadTextFile(const std::string& path) {
  struct File {
    int fd;
    ~File() {
      if (fd >= 0) ::close(fd);
    }
  } const file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)};
  const int fd = file.fd;
  if (fd < 0) {
    return NotFoundError("cannot open the stats file '" + path + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return StorageError("stat of the stats file '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgumentError("the stats file '" + path + "' is not a regular file (" +
                                (S_ISDIR(st.st_mode)    ? "a directory"
                                 : S_ISFIFO(st.st_mode) ? "a named pipe"
                                 : S_ISSOCK(st.st_mode) ? "a socket"
                                                        : "a device or special file") +
                                ")");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > kMaxStatsFileBytes) {
    return InvalidArgumentError("the stats file '" + path + "' is " + std::to_string(size) +
                                " bytes, more than any stats file (" +
                                std::to_string(kMaxStatsFileBytes) + ")");
  }
  std::string text(size, '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return StorageError("reading the stats file '" + path + "': " + std::strerror(errno));
    }
    if (n == 0) break;  // shorter than it was: the file changed while it was read
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
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

bool SameDecoding(const CfDecoding& a, const CfDecoding& b) {
  // Bit for bit: a NaN fill value is the same as another NaN.
  const auto same = [](double x, double y) {
    return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
  };
  bool equal = a.source == b.source && a.decode == b.decode && a.decoded == b.decoded &&
               a.has_scale_factor == b.has_scale_factor && a.has_add_offset == b.has_add_offset &&
               same(a.scale_factor, b.scale_factor) && same(a.add_offset, b.add_offset) &&
               a.num_fill_values == b.num_fill_values;
  for (uint32_t k = 0; equal && k < a.num_fill_values; ++k) {
    equal = same(a.fill_values[k], b.fill_values[k]);
  }
  return equal;
}

// Each channel's CF decoding from its array's attributes (all values as stored when off). The
// stores a combined channel's time runs come from must decode alike: one decoding per channel.
Status SetCfDecoding(bool decode_cf, LoaderGeometry& g) {
  g.cf.clear();
  for (const Channel& channel : g.channels) {
    if (!decode_cf) {
      g.cf.push_back(StoredValues(channel.array.dtype()));
      continue;
    }
    ZS_ASSIGN_OR_RETURN(CfDecoding cf, CfDecodingOf(channel.array));
    for (const TimeSegment& segment : channel.time_segments) {
      ZS_ASSIGN_OR_RETURN(CfDecoding other, CfDecodingOf(segment.array));
      if (!SameDecoding(cf, other)) {
        return ConfigError("channel '" + channel.name + "': " + segment.array.state().Describe() +
                           " and " + channel.array.state().Describe() +
                           " hold its values with different CF encodings (scale_factor, "
                           "add_offset, _FillValue, missing_value): one channel decodes one way");
      }
    }
    g.cf.push_back(cf);
  }
  return Status::Ok();
}

// Statistics of stored values cannot normalise CF-decoded ones, nor the other way round: where the
// stats file says how it was made and a channel decodes otherwise, the file is refused.
Status CheckStatsDecoding(const std::string& stats_path, const ChannelStatsFile& stats,
                          bool decode_cf, const Channel& channel) {
  if (!stats.decode_cf || *stats.decode_cf == decode_cf) return Status::Ok();
  ZS_ASSIGN_OR_RETURN(CfDecoding cf, CfDecodingOf(channel.array));
  if (!cf.decode) return Status::Ok();  // nothing to decode: the values are the same
  const auto setting = [](bool on) { return on ? "decode_cf=True" : "decode_cf=False"; };
  return ConfigError("the stats file '" + stats_path + "' was computed with " +
                     setting(*stats.decode_cf) + " but the loader runs with " + setting(decode_cf) +
                     ", and channel '" + channel.name +
                     "' is CF-encoded (packed or masked): recompute it with `zarrstream stats` " +
                     (decode_cf ? "(without --no-decode-cf)" : "--no-decode-cf") +
                     " or construct the loader with " + setting(*stats.decode_cf));
}

Status SetNormalisation(const std::string& stats_path, bool decode_cf, LoaderGeometry& g) {
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
    if (it == by_name.end() && g.channels[c].member_dim) {
      // A member stacked into channels: its variable's statistics, over every member.
      it = by_name.find(name.substr(0, name.rfind('#')));
    }
    if (it == by_name.end()) return MissingStatsError(stats_path, name, available);
    ZS_RETURN_IF_ERROR(CheckStatsDecoding(stats_path, *stats, decode_cf, g.channels[c]));
    const ChannelStats& s = *it->second;
    if (!std::isfinite(s.mean) || !std::isfinite(s.std))
      return UndefinedStatsError(stats_path, name);
    g.mean[c] = s.mean;
    g.inv_std[c] = s.std > 0 ? 1.0 / s.std : 1.0;
  }
  return Status::Ok();
}

// LoaderOptions::target_tendencies: each target slab's base slab (its channel at the window's last
// input step) and the statistics of its tendency over its distance from that step, in store steps.
Status SetTargetTendencies(const LoaderOptions& options, LoaderGeometry& g) {
  if (!options.target_tendencies) return Status::Ok();
  const std::string what = "target_normalize='tendencies'";
  if (options.normalize.empty()) {
    return ConfigError(what +
                       " needs a stats file with tendencies (normalize=, from `zarrstream "
                       "stats --tendencies N`)");
  }
  if (g.target_slabs.empty()) {
    return ConfigError(what + " needs targets at offsets along the time dimension (target=)");
  }
  ZS_ASSIGN_OR_RETURN(std::string text, ReadTextFile(options.normalize));
  auto stats = ParseChannelStats(text);
  if (!stats.ok()) {
    return std::move(stats).status().WithContext("reading the stats file '" + options.normalize +
                                                 "'");
  }
  for (const Slab& target : g.target_slabs) {
    const std::string& name = g.channels[target.channel].name;
    const uint64_t steps = (target.step - (g.time_window - 1)) * g.time_step;
    const auto channel = std::find_if(stats->channels.begin(), stats->channels.end(),
                                      [&](const ChannelStats& c) { return c.name == name; });
    // SetNormalisation found every channel in the file.
    const auto tendency = std::find_if(channel->tendencies.begin(), channel->tendencies.end(),
                                       [&](const TendencyStats& t) { return t.steps == steps; });
    if (tendency == channel->tendencies.end()) {
      std::vector<std::string> has;
      for (const TendencyStats& t : channel->tendencies) has.push_back(std::to_string(t.steps));
      std::string s = what;
      s += ": the stats file '";
      s += options.normalize;
      s += "' has no tendency over ";
      s += std::to_string(steps);
      s += " time steps of the store for target channel '";
      s += name;
      s += has.empty() ? "' (it has no tendencies for it" : "' (it has tendencies over ";
      if (!has.empty()) {
        s += Join(has);
        s += " steps";
      }
      s += "): compute them with `zarrstream stats --tendencies ";
      s += std::to_string(steps);
      s += '`';
      return ConfigError(std::move(s));
    }
    if (!std::isfinite(tendency->mean) || !std::isfinite(tendency->std)) {
      std::string s = what;
      s += ": the stats file '";
      s += options.normalize;
      s += "' gives target channel '";
      s += name;
      s += "' no finite mean and std of its tendency over ";
      s += std::to_string(steps);
      s += " time steps: it cannot normalise it";
      return ConfigError(std::move(s));
    }
    Slab base = target;
    base.step = g.time_window - 1;
    base.out_channel = static_cast<uint32_t>(g.base_slabs.size());
    base.base = true;
    g.base_slabs.push_back(base);
    g.target_mean.push_back(tendency->mean);
    g.target_inv_std.push_back(tendency->std > 0 ? 1.0 / tendency->std : 1.0);
  }
  return Status::Ok();
}

// The variables the options name; by default every data variable but the forcings, and where some
// vary in time, the static fields (orography, land-sea mask) stay out unless named.
Result<std::vector<std::string>> Variables(const Dataset& dataset, const LoaderOptions& options) {
  std::vector<std::string> variables = options.variables;
  if (!variables.empty()) return variables;
  ZS_ASSIGN_OR_RETURN(std::vector<VariableSpec> forcing_specs,
                      ParseVariableSpecs(options.forcings));
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
  return variables;
}

// The computed forcings among `forcings` (a name the dataset holds as a variable is read, not
// computed), in order: each computed one's kind, each stored one's channel count in `index`; the
// stored ones are appended to `inputs`. A name that is neither is a kNotFound error naming both.
Result<std::vector<InputSource>> SplitForcings(const Dataset& dataset, const LoaderOptions& options,
                                               const std::string& member_dim,
                                               const std::string& where,
                                               std::vector<std::string>& inputs) {
  std::vector<InputSource> order;
  const std::vector<std::string>& names = dataset.variable_names();
  for (const std::string& forcing : options.forcings) {
    ZS_ASSIGN_OR_RETURN(std::vector<VariableSpec> spec,
                        ParseVariableSpecs(std::vector<std::string>{forcing}));
    const bool stored =
        spec.size() != 1 || std::find(names.begin(), names.end(), spec[0].variable) != names.end();
    const std::optional<forcing_math::Kind> kind = ComputedForcingByName(forcing);
    if (!stored && kind) {
      if (std::any_of(order.begin(), order.end(),
                      [&](const InputSource& f) { return f.computed && f.index == *kind; })) {
        return InvalidArgumentError("computed forcing '" + forcing + "' is named twice");
      }
      order.push_back(InputSource{true, *kind});
      continue;
    }
    if (!stored && !dataset.is_single_array()) {
      std::string message = "forcing '";
      message += forcing;
      message += "' is neither a variable of ";
      message += where;
      message += " (variables: ";
      message += JoinNames(names);
      message += ") nor a computed forcing (";
      message += ComputedForcingNames();
      message += ")";
      return NotFoundError(std::move(message));
    }
    ZS_ASSIGN_OR_RETURN(std::vector<Channel> channels,
                        Resolve(dataset, {forcing}, options, member_dim));
    order.push_back(InputSource{false, channels.size()});
    inputs.push_back(forcing);
  }
  return order;
}

// The first channel that is neither a static field nor without the ensemble's members: its
// dimensions are the geometry's.
const Channel& ReferenceChannel(const std::vector<Channel>& channels) {
  for (const bool need_member : {true, false}) {
    for (const Channel& c : channels) {
      if (!c.broadcast && (!need_member || !c.without_member)) return c;
    }
  }
  return channels.front();
}

// Channels: variables, then forcings, as inputs; targets (the variables unless named) after them.
// A static field is an input only: it has no step to predict.
Status SetChannels(const Dataset& dataset, const LoaderOptions& options, const std::string& where,
                   const std::string& member_dim, LoaderGeometry& g) {
  ZS_ASSIGN_OR_RETURN(std::vector<std::string> variables, Variables(dataset, options));
  std::vector<std::string> inputs = variables;
  ZS_ASSIGN_OR_RETURN(std::vector<InputSource> forcing_order,
                      SplitForcings(dataset, options, member_dim, where, inputs));
  ZS_ASSIGN_OR_RETURN(std::vector<Channel> input_channels,
                      Resolve(dataset, inputs, options, member_dim));
  if (input_channels.empty()) return InvalidArgumentError(where + " has no data variables");
  // The stored inputs in order, the computed forcings among the forcings where they are named. A
  // stored forcing's index is the number of channels it resolved to (a forcing with levels has
  // several): the variables' channels are what the forcings' leave.
  size_t stored_forcing_channels = 0;
  for (const InputSource& f : forcing_order) {
    if (!f.computed) stored_forcing_channels += f.index;
  }
  if (stored_forcing_channels > input_channels.size()) {
    return InternalError(where + ": the forcings resolved to more channels than the inputs");
  }
  size_t stored = input_channels.size() - stored_forcing_channels;
  for (size_t c = 0; c < stored; ++c) g.input_order.push_back(InputSource{false, c});
  for (const InputSource& f : forcing_order) {
    if (f.computed) {
      g.input_order.push_back(f);
    } else {
      for (size_t k = 0; k < f.index; ++k) g.input_order.push_back(InputSource{false, stored++});
    }
  }
  const Channel& first = ReferenceChannel(input_channels);
  std::vector<Channel> target_channels;
  if (!options.target_dim.empty()) {
    const bool named = !options.target_variables.empty();
    ZS_ASSIGN_OR_RETURN(
        target_channels,
        Resolve(dataset, named ? options.target_variables : variables, options, member_dim));
    const bool timed = HasTimeDimension(first.dims);
    for (const Channel& t : target_channels) {
      if (named && timed && !HasTimeDimension(t.dims)) {
        return ConfigError("target variable '" + t.name + "' of " + where +
                           " has no time dimension: a static field is an input only "
                           "(name it in variables or forcings)");
      }
    }
    std::erase_if(target_channels,
                  [&](const Channel& t) { return timed && !HasTimeDimension(t.dims); });
    if (target_channels.empty()) {
      return ConfigError("the variables of " + where +
                         " are all static fields: none can be a target");
    }
  } else if (!options.target_variables.empty() || !options.target_offsets.empty()) {
    return InvalidArgumentError(
        "target variables or offsets need a target dimension "
        "(target_offset={\"time\": 1})");
  }
  for (const Channel& t : target_channels) {
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
  return Status::Ok();
}

// The channels' names, the checks of what the loader can read, and the distinct arrays.
Status SetArrays(LoaderGeometry& g) {
  std::vector<std::string> array_urls;
  std::vector<Array> handles;
  // Channels of one array (levels; an input that is also a target) share its chunks: one handle
  // per array, so the read plan deduplicates them.
  const auto slot_of = [&](Array& array) {
    auto it = std::find(array_urls.begin(), array_urls.end(), array.url());
    const auto slot = static_cast<size_t>(it - array_urls.begin());
    if (it == array_urls.end()) {
      array_urls.push_back(array.url());
      g.arrays.push_back(&array.state());
      handles.push_back(array);
    } else {
      array = handles[slot];
    }
    return slot;
  };
  g.time_segments.resize(g.channels.size());
  for (size_t c = 0; c < g.channels.size(); ++c) {
    Channel& ch = g.channels[c];
    (c < g.num_inputs ? g.input_names : g.target_names).push_back(ch.name);
    std::vector<const Array*> arrays = {&ch.array};
    for (const TimeSegment& segment : ch.time_segments) arrays.push_back(&segment.array);
    for (const Array* array : arrays) {
      if (array->rank() > kLoaderMaxRank) {
        return UnsupportedError("channel '" + ch.name + "': " + array->state().Describe() +
                                " has " + std::to_string(array->rank()) +
                                " dimensions; the loader reads at most " +
                                std::to_string(kLoaderMaxRank));
      }
      if (!SupportedSource(array->dtype())) {
        return UnsupportedError("channel '" + ch.name + "': " + array->state().Describe() +
                                " holds " + std::string(DataTypeName(array->dtype())) +
                                "; the loader reads integer and floating-point arrays");
      }
    }
    g.channel_array.push_back(slot_of(ch.array));
    for (TimeSegment& segment : ch.time_segments) {
      g.time_segments[c].push_back(
          ArraySegment{segment.begin, segment.end, segment.first, slot_of(segment.array)});
    }
  }
  return Status::Ok();
}

// The index of the channels' dimension `name`, which the options name as `what`.
Result<size_t> DimIndex(const LoaderGeometry& g, const std::string& name, std::string_view what,
                        const std::string& where) {
  auto it = std::find(g.dims.begin(), g.dims.end(), name);
  if (it != g.dims.end()) return static_cast<size_t>(it - g.dims.begin());
  if (IsLevelDimension(name) || name == "channel") {
    return InvalidArgumentError(std::string(what) + " '" + name +
                                "': levels and channels are chosen with the variables "
                                "(\"temperature@500,850\")");
  }
  return NotFoundError(std::string(what) + " '" + name + "' is not a dimension of the channels (" +
                       JoinNames(g.dims) + ") of " + where);
}

// The periodic dimensions (LoaderOptions::periodic: named, or detected from their coordinates)
// and their coordinates as periodic ones, by dimension index; a periodic dimension without a
// coordinate wraps by index only.
Result<std::map<size_t, std::optional<Coordinate>>> PeriodicDimensions(
    const Dataset& dataset, const LoaderOptions& options, const std::string& where,
    const std::vector<uint64_t>& shape, LoaderGeometry& g) {
  std::map<size_t, std::optional<Coordinate>> periodic;
  if (options.periodic) {
    for (const std::string& name : *options.periodic) {
      ZS_ASSIGN_OR_RETURN(size_t d, DimIndex(g, name, "periodic dimension", where));
      if (IsTimeDimension(name)) {
        return ConfigError("periodic dimension '" + name + "': a time dimension cannot wrap");
      }
      std::optional<Coordinate>& coordinate = periodic[d];
      Result<Coordinate> loaded = dataset.LoadCoordinate(name);
      if (loaded.ok() && loaded->size() == shape[d]) {
        ZS_ASSIGN_OR_RETURN(coordinate, loaded->AsPeriodic(true));
      }
    }
  } else {
    for (size_t d = 0; d < g.dims.size(); ++d) {
      if (IsTimeDimension(g.dims[d])) continue;
      Result<Coordinate> loaded = dataset.LoadCoordinate(g.dims[d]);
      if (loaded.ok() && loaded->periodic() && loaded->size() == shape[d]) {
        periodic[d] = std::move(loaded).value();
      }
    }
  }
  for (const auto& [d, coordinate] : periodic) g.axes[d].period = shape[d];
  return periodic;
}

// The channels' dimensions and each one's selected range: whole, or one run of a label selection
// (on a periodic dimension, one run around it).
Status SetRanges(const Dataset& dataset, const LoaderOptions& options, const std::string& where,
                 LoaderGeometry& g) {
  const Channel& first = ReferenceChannel(g.channels);
  g.dims = first.dims;
  g.ranges.resize(g.dims.size());
  g.axes.assign(g.dims.size(), AxisIndexing{});
  for (size_t d = 0; d < g.dims.size(); ++d) g.ranges[d] = IndexRange{0, first.shape[d]};
  ZS_ASSIGN_OR_RETURN(auto periodic, PeriodicDimensions(dataset, options, where, first.shape, g));
  std::set<std::string> selected;
  for (const LabelSelection& selection : options.select) {
    Result<size_t> dim_index = DimIndex(g, selection.dim, "selection of", where);
    std::optional<Coordinate> loaded;
    if (!dim_index.ok()) {
      // A text coordinate along a dimension of its own name's choosing (ERA5's `expver` along
      // `valid_time`) selects on that dimension.
      Result<Coordinate> other = dataset.LoadCoordinate(selection.dim);
      if (!other.ok() || other->along() == selection.dim) return dim_index.status();
      dim_index = DimIndex(g, other->along(), "selection of", where);
      loaded = std::move(other).value();
    } else {
      ZS_ASSIGN_OR_RETURN(loaded, dataset.LoadCoordinate(selection.dim));
    }
    ZS_ASSIGN_OR_RETURN(size_t d, dim_index);
    const auto wrapping = periodic.find(d);
    if (wrapping != periodic.end() && wrapping->second && selection.dim == g.dims[d]) {
      loaded = wrapping->second;
    } else if (wrapping == periodic.end() && loaded->periodic()) {
      ZS_ASSIGN_OR_RETURN(loaded, loaded->AsPeriodic(false));  // `periodic` leaves it out
    }
    const Coordinate& coordinate = *loaded;
    if (!selected.insert(g.dims[d]).second) {
      return InvalidArgumentError("dimension '" + g.dims[d] + "' is selected twice for " + where);
    }
    ZS_ASSIGN_OR_RETURN(std::vector<uint64_t> indices, coordinate.Select(selection));
    const uint64_t period = g.axes[d].period;
    for (size_t i = 1; i < indices.size(); ++i) {
      if (indices[i] != indices[i - 1] + 1 &&
          (period == 0 || indices[i] != 0 || indices[i - 1] + 1 != period)) {
        return InvalidArgumentError("selection '" + selection.ToString() + "' of " +
                                    coordinate.Describe() +
                                    " picks indices that are not one run; the loader samples "
                                    "a contiguous range");
      }
    }
    // A run around a periodic dimension goes on past its end.
    g.ranges[d] = IndexRange{indices.front(), indices.front() + indices.size()};
  }
  return Status::Ok();
}

// The store's steps per sample step along the time dimension, from LoaderOptions::frequency and
// the selected run of the time coordinate, which must be evenly spaced.
Status SetFrequency(const Dataset& dataset, const LoaderOptions& options, const std::string& where,
                    LoaderGeometry& g) {
  if (options.frequency.empty()) return Status::Ok();
  ZS_ASSIGN_OR_RETURN(const int64_t seconds, ParseDuration("frequency", options.frequency));
  const auto time = std::find_if(g.dims.begin(), g.dims.end(),
                                 [](const std::string& dim) { return IsTimeDimension(dim); });
  if (time == g.dims.end()) {
    return ConfigError("frequency '" + options.frequency + "': the channels of " + where +
                       " have no time dimension (" + JoinNames(g.dims) + ")");
  }
  ZS_ASSIGN_OR_RETURN(Coordinate coordinate, dataset.LoadCoordinate(*time));
  const IndexRange& r = g.ranges[static_cast<size_t>(time - g.dims.begin())];
  if (!coordinate.is_time() || coordinate.size() < r.stop) {
    return ConfigError("frequency '" + options.frequency + "': " + coordinate.Describe() +
                       " does not hold a time for each step");
  }
  const int64_t step = r.size() > 1
                           ? coordinate.TimeSeconds(r.start + 1) - coordinate.TimeSeconds(r.start)
                           : seconds;
  for (uint64_t i = r.start + 1; i < r.stop; ++i) {
    if (coordinate.TimeSeconds(i) - coordinate.TimeSeconds(i - 1) != step) {
      return ConfigError("frequency '" + options.frequency + "': the selected times of " +
                         coordinate.Describe() + " are not evenly spaced (" +
                         coordinate.FormatLabel(i - 1) + " to " + coordinate.FormatLabel(i) +
                         " after steps of " + std::to_string(step) + " s)");
    }
  }
  if (step <= 0 || seconds % step != 0) {
    return ConfigError("frequency '" + options.frequency + "' (" + std::to_string(seconds) +
                       " s) is not a whole number of the steps of " + coordinate.Describe() + " (" +
                       std::to_string(step) + " s)");
  }
  g.time_step = static_cast<uint64_t>(seconds / step);
  return Status::Ok();
}

// The store indices `steps` sample steps along the time dimension span (saturating).
uint64_t StoreSpan(const LoaderGeometry& g, uint64_t steps) {
  uint64_t span = 0;
  if (steps == 0) return 0;
  return __builtin_mul_overflow(steps - 1, g.time_step, &span) ? UINT64_MAX : span + 1;
}

// Patch padding of sampled dimension `d` (LoaderOptions::patch_padding): the selection grows at
// both ends until windows a stride apart cover all of it.
Status PadSampledDimension(const std::string& where, size_t d, LoaderGeometry& g) {
  if (g.padding.mode == PatchPadding::Mode::kNone) return Status::Ok();
  const IndexRange selected = g.ranges[d];
  const uint64_t n = selected.size(), window = g.window[d], stride = g.stride[d];
  const uint64_t windows = n <= window ? 1 : (n - window + stride - 1) / stride + 1;
  const uint64_t extra = (windows - 1) * stride + window - n;
  if (extra == 0) return Status::Ok();
  const uint64_t before = extra / 2, after = extra - before;
  if (g.padding.mode == PatchPadding::Mode::kReflect && after >= n) {
    return ConfigError("patch padding 'reflect' along '" + g.dims[d] + "' needs " +
                       std::to_string(after) + " mirrored indices at an edge of its " +
                       std::to_string(n) + " selected ones in " + where + " (windows of " +
                       std::to_string(window) + ", stride " + std::to_string(stride) +
                       "); pad with a value instead");
  }
  AxisIndexing& axis = g.axes[d];
  axis.padded = true;
  axis.pad_before = before;
  axis.selected = selected;
  g.ranges[d] = IndexRange{selected.start, selected.stop + extra};
  return Status::Ok();
}

// Sampled dimensions (the time dimension always, with window 1 unless given), windows and strides.
Status SetSampling(const LoaderOptions& options, const std::string& where,
                   const std::string& member_dim, LoaderGeometry& g) {
  const size_t rank = g.dims.size();
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
    ZS_ASSIGN_OR_RETURN(size_t d, DimIndex(g, name, "sample dimension", where));
    if (window == 0) return InvalidArgumentError("sample window along '" + name + "' is 0");
    if (options.ensemble == EnsembleMode::kSample && name == member_dim && window != 1) {
      return ConfigError("sample window " + std::to_string(window) + " along '" + name +
                         "': with ensemble=\"sample\" each member is a sample (window 1)");
    }
    g.sampled[d] = 1;
    g.window[d] = window;
  }
  if (options.ensemble == EnsembleMode::kSample) {
    ZS_ASSIGN_OR_RETURN(const size_t d, DimIndex(g, member_dim, "ensemble dimension", where));
    g.member_dim = d;
    g.sampled[d] = 1;
    g.window[d] = 1;
  } else if (options.ensemble == EnsembleMode::kChannels &&
             std::none_of(g.channels.begin(), g.channels.end(),
                          [](const Channel& c) { return c.member_dim.has_value(); })) {
    return ConfigError("ensemble=\"channels\": no channel of " + where +
                       " has the member dimension '" + member_dim + "'");
  }
  for (size_t d = 0; d < rank; ++d) g.stride[d] = g.window[d];
  for (const auto& [name, stride] : options.stride) {
    ZS_ASSIGN_OR_RETURN(size_t d, DimIndex(g, name, "stride dimension", where));
    if (!g.sampled[d]) {
      return InvalidArgumentError("stride along '" + name +
                                  "', which is not sampled: give it a window in `sample`");
    }
    if (stride == 0) return InvalidArgumentError("stride along '" + name + "' is 0");
    g.stride[d] = stride;
  }
  g.padding = options.patch_padding;
  for (size_t d = 0; d < rank; ++d) {
    const bool time = g.time_dim && *g.time_dim == d;
    if (g.sampled[d] && !time && g.axes[d].period == 0) {
      ZS_RETURN_IF_ERROR(PadSampledDimension(where, d, g));
    }
    if ((time ? StoreSpan(g, g.window[d]) : g.window[d]) > g.ranges[d].size()) {
      return InvalidArgumentError(
          "sample window " + std::to_string(g.window[d]) + " along '" + g.dims[d] + "'" +
          (time && g.time_step > 1
               ? " (steps of " + options.frequency + ": " +
                     std::to_string(StoreSpan(g, g.window[d])) + " of the store)"
               : std::string()) +
          " is larger than its " + std::to_string(g.ranges[d].size()) + " selected indices in " +
          where);
    }
  }
  for (size_t d = 0; d < rank; ++d) {
    // A periodic dimension sampled whole: a window from every index, wrapping.
    if (g.sampled[d] && g.axes[d].period != 0 && g.ranges[d].size() == g.axes[d].period) {
      g.ranges[d].stop += g.window[d] - 1;
    }
  }
  g.time_window = g.time_dim ? g.window[*g.time_dim] : 1;
  return Status::Ok();
}

// Target steps: offsets along the time dimension after the input window, inside the selection.
Status SetTargetSteps(const LoaderOptions& options, const std::string& where, LoaderGeometry& g) {
  if (options.target_dim.empty()) return Status::Ok();
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
  if (StoreSpan(g, g.time_window + reach) > r.size()) {
    return InvalidArgumentError("target offset " + std::to_string(reach) + " after a window of " +
                                std::to_string(g.time_window) + " along '" + options.target_dim +
                                "' reaches past the " + std::to_string(r.size()) +
                                " selected steps of " + where);
  }
  return Status::Ok();
}

// The time steps no sample may touch: the labels LoaderOptions::missing_dates names, and with
// detect_missing_dates the steps some channel has no value at (dataset/missing_dates.h).
Status SetMissingDates(const Dataset& dataset, const LoaderOptions& options,
                       const std::string& where, ThreadPool* pool, LoaderGeometry& g) {
  if (options.missing_dates.empty() && !options.detect_missing_dates) return Status::Ok();
  if (!g.time_dim) {
    return ConfigError("missing dates: the channels of " + where + " have no time dimension (" +
                       JoinNames(g.dims) + ")");
  }
  std::set<uint64_t> missing;
  if (!options.missing_dates.empty()) {
    ZS_ASSIGN_OR_RETURN(Coordinate coordinate, dataset.LoadCoordinate(g.dims[*g.time_dim]));
    ZS_ASSIGN_OR_RETURN_CTX(std::vector<uint64_t> indices,
                            coordinate.SelectValues(options.missing_dates), "missing dates");
    missing.insert(indices.begin(), indices.end());
  }
  if (options.detect_missing_dates) {
    ZS_ASSIGN_OR_RETURN(std::vector<uint64_t> detected, DetectMissingSteps(g, pool));
    missing.insert(detected.begin(), detected.end());
  }
  const IndexRange& range = g.ranges[*g.time_dim];
  for (uint64_t t : missing) {
    if (t >= range.start && t < range.stop) g.missing_steps.push_back(t);
  }
  return Status::Ok();
}

// The boxes of the static fields' arrays that the loader keeps: the selection of every dimension
// but time, and the whole level dimension.
void SetResident(LoaderGeometry& g) {
  g.resident.assign(g.arrays.size(), std::nullopt);
  for (size_t c = 0; c < g.channels.size(); ++c) {
    const Channel& channel = g.channels[c];
    std::optional<ResidentBox>& box = g.resident[g.channel_array[c]];
    if (!channel.broadcast || box) continue;
    box.emplace();
    box->start.assign(channel.array.rank(), 0);
    box->shape = channel.array.shape();
    for (size_t d = 0; d < g.dims.size(); ++d) {
      const std::optional<size_t> a = ArrayDimOf(g, c, d);
      if (!a) continue;
      const IndexRange touched = TouchedStoreRange(g, d);
      box->start[*a] = touched.start;
      box->shape[*a] = touched.size();
    }
  }
}

// A 1-D coordinate of `g`'s dimension named `names[0]` or `names[1]`, in degrees, for the
// computed forcing `forcing`.
Status LoadDegrees(const Dataset& dataset, const LoaderGeometry& g, std::string_view forcing,
                   const std::string& where, std::initializer_list<std::string_view> names,
                   std::optional<size_t>* dim, std::vector<double>* values) {
  if (*dim) return Status::Ok();
  for (size_t d = 0; d < g.dims.size(); ++d) {
    if (std::find(names.begin(), names.end(), g.dims[d]) == names.end()) continue;
    ZS_ASSIGN_OR_RETURN(Coordinate coordinate, dataset.LoadCoordinate(g.dims[d]));
    if (coordinate.is_time() || coordinate.is_text() ||
        coordinate.size() < TouchedStoreRange(g, d).stop) {
      return ConfigError("computed forcing '" + std::string(forcing) + "' needs " +
                         coordinate.Describe() + " to hold a number of degrees for each index");
    }
    // By the loader's index: what each one reads (a wrapped or mirrored index its source's value;
    // padding with a value takes the edge's, which the padding then covers).
    values->resize(g.ranges[d].stop);
    for (uint64_t i = 0; i < values->size(); ++i) {
      (*values)[i] = coordinate.NumericValue(SourceIndex(g, d, i));
    }
    *dim = d;
    return Status::Ok();
  }
  return ConfigError(
      "computed forcing '" + std::string(forcing) + "' needs a '" + std::string(*names.begin()) +
      "' dimension with a 1-D coordinate; the channels of " + where + " have " + JoinNames(g.dims));
}

// The coordinates the computed forcings read: latitude and longitude in degrees, valid times.
Status SetComputedForcings(const Dataset& dataset, const std::string& where, LoaderGeometry& g) {
  for (const InputSource& source : g.input_order) {
    if (!source.computed) continue;
    const auto kind = static_cast<forcing_math::Kind>(source.index);
    const std::string_view name = ComputedForcingName(kind);
    if (ComputedForcingNeedsLatitude(kind)) {
      ZS_RETURN_IF_ERROR(
          LoadDegrees(dataset, g, name, where, {"latitude", "lat"}, &g.latitude_dim, &g.latitudes));
    }
    if (ComputedForcingNeedsLongitude(kind)) {
      ZS_RETURN_IF_ERROR(LoadDegrees(dataset, g, name, where, {"longitude", "lon"},
                                     &g.longitude_dim, &g.longitudes));
    }
    if (ComputedForcingNeedsTime(kind) && g.times.empty()) {
      if (!g.time_dim) {
        return ConfigError("computed forcing '" + std::string(name) +
                           "' needs a time dimension; the channels of " + where + " have " +
                           JoinNames(g.dims));
      }
      ZS_ASSIGN_OR_RETURN(Coordinate coordinate, dataset.LoadCoordinate(g.dims[*g.time_dim]));
      if (!coordinate.is_time() || coordinate.size() < g.ranges[*g.time_dim].stop) {
        return ConfigError("computed forcing '" + std::string(name) + "' needs " +
                           coordinate.Describe() + " to hold a CF time for each step");
      }
      const Calendar calendar = coordinate.time_units()->calendar();
      if (calendar != Calendar::kStandard && calendar != Calendar::kProlepticGregorian) {
        return ConfigError("computed forcing '" + std::string(name) + "' needs a Gregorian " +
                           coordinate.Describe() + "; its calendar is " +
                           std::string(CalendarName(calendar)));
      }
      // Seconds since 1970-01-01 UTC from the calendar's fields (proleptic Gregorian; the
      // standard calendar is Gregorian from 1582-10-15 on, which the check below asks).
      g.times.resize(coordinate.size());
      for (uint64_t i = 0; i < coordinate.size(); ++i) {
        const DateTime t = FromCalendarSeconds(coordinate.TimeSeconds(i), calendar);
        if (calendar == Calendar::kStandard &&
            std::tuple(t.year, t.month, t.day) < std::tuple(int64_t{1582}, 10, 15)) {
          return ConfigError("computed forcing '" + std::string(name) +
                             "': " + coordinate.Describe() + " holds " + FormatDateTime(t) +
                             ", a Julian date of the standard calendar");
        }
        g.times[i] = forcing_math::DaysFromCivil(t.year, t.month, t.day) * 86400 +
                     int64_t{t.hour} * 3600 + int64_t{t.minute} * 60 + t.second;
      }
    }
  }
  return Status::Ok();
}

// The batch's layout: sampled and spatial dimensions, and the output channels (time-major inputs,
// lead-major targets).
void SetLayout(LoaderGeometry& g) {
  for (size_t d = 0; d < g.dims.size(); ++d) {
    if (g.sampled[d]) {
      g.sample_dims.push_back(g.dims[d]);
      g.sampled_index.push_back(d);
    }
    if ((g.time_dim && *g.time_dim == d) || (g.member_dim && *g.member_dim == d)) continue;
    g.spatial_dims.push_back(g.dims[d]);
    g.spatial_index.push_back(d);
    g.spatial_shape.push_back(g.window[d]);
    g.slab_elements *= g.window[d];
  }
  const auto num_targets = static_cast<uint32_t>(g.channels.size() - g.num_inputs);
  const size_t per_step = g.input_order.size();
  for (uint64_t t = 0; t < g.time_window; ++t) {
    for (size_t i = 0; i < per_step; ++i) {
      const InputSource& source = g.input_order[i];
      const auto out = static_cast<uint32_t>(t * per_step + i);
      if (source.computed) {
        g.computed_slabs.push_back(
            ComputedSlab{static_cast<forcing_math::Kind>(source.index), t, out});
      } else {
        g.input_slabs.push_back(Slab{source.index, t, out, /*target=*/false});
      }
    }
  }
  g.input_channels = per_step * g.time_window;
  g.input_names.clear();
  for (const InputSource& source : g.input_order) {
    g.input_names.emplace_back(source.computed ? std::string(ComputedForcingName(
                                                     static_cast<forcing_math::Kind>(source.index)))
                                               : g.channels[source.index].name);
  }
  for (size_t j = 0; j < g.target_steps.size(); ++j) {
    for (uint32_t c = 0; c < num_targets; ++c) {
      g.target_slabs.push_back(Slab{g.num_inputs + c, g.target_steps[j],
                                    static_cast<uint32_t>(j * num_targets + c), /*target=*/true});
    }
  }
}

}  // namespace

std::string_view EnsembleModeName(EnsembleMode mode) {
  switch (mode) {
    case EnsembleMode::kNone:
      return "none";
    case EnsembleMode::kSample:
      return "sample";
    case EnsembleMode::kChannels:
      return "channels";
  }
  return "none";
}

Result<EnsembleMode> ParseEnsembleMode(std::string_view name) {
  for (EnsembleMode mode : {EnsembleMode::kNone, EnsembleMode::kSample, EnsembleMode::kChannels}) {
    if (name == EnsembleModeName(mode)) return mode;
  }
  return InvalidArgumentError("ensemble mode '" + std::string(name) +
                              "': expected 'none', 'sample' or 'channels'");
}

Result<PatchPadding> ParsePatchPadding(std::string_view text) {
  PatchPadding padding;
  if (text == "none") return padding;
  if (text == "reflect") {
    padding.mode = PatchPadding::Mode::kReflect;
    return padding;
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgumentError("patch padding '" + std::string(text) +
                                "': expected 'none', 'reflect' or a number");
  }
  padding.mode = PatchPadding::Mode::kValue;
  padding.value = value;
  return padding;
}

void MapAxisRun(const LoaderGeometry& g, size_t d, uint64_t start, uint64_t extent,
                std::vector<AxisPiece>* pieces) {
  const AxisIndexing& axis = g.axes[d];
  if (axis.period != 0) {
    uint64_t store = start % axis.period;
    for (uint64_t offset = 0; offset < extent;) {
      const uint64_t length = std::min(extent - offset, axis.period - store);
      pieces->push_back(AxisPiece{offset, store, length, false});
      offset += length;
      store = 0;
    }
    return;
  }
  if (!axis.padded) {
    pieces->push_back(AxisPiece{0, start, extent, false});
    return;
  }
  const auto lo = static_cast<int64_t>(axis.selected.start);
  const auto hi = static_cast<int64_t>(axis.selected.stop);
  for (uint64_t offset = 0; offset < extent;) {
    const int64_t store = static_cast<int64_t>(start + offset - axis.pad_before);
    const uint64_t left = extent - offset;
    if (store >= lo && store < hi) {
      const uint64_t length = std::min<uint64_t>(left, static_cast<uint64_t>(hi - store));
      pieces->push_back(AxisPiece{offset, static_cast<uint64_t>(store), length, false});
      offset += length;
    } else if (g.padding.mode == PatchPadding::Mode::kValue) {
      const uint64_t length =
          store < lo ? std::min<uint64_t>(left, static_cast<uint64_t>(lo - store)) : left;
      pieces->push_back(AxisPiece{offset, 0, length, true});
      offset += length;
    } else {
      const int64_t mirror = store < lo ? 2 * lo - store : 2 * (hi - 1) - store;
      pieces->push_back(AxisPiece{offset, static_cast<uint64_t>(mirror), 1, false});
      ++offset;
    }
  }
}

uint64_t SourceIndex(const LoaderGeometry& g, size_t d, uint64_t index) {
  std::vector<AxisPiece> pieces;
  MapAxisRun(g, d, index, 1, &pieces);
  const AxisIndexing& axis = g.axes[d];
  if (!pieces[0].padding) return pieces[0].store;
  return static_cast<int64_t>(index) - static_cast<int64_t>(axis.pad_before) <
                 static_cast<int64_t>(axis.selected.start)
             ? axis.selected.start
             : axis.selected.stop - 1;
}

int64_t ReportedIndex(const LoaderGeometry& g, size_t d, uint64_t index) {
  const AxisIndexing& axis = g.axes[d];
  if (axis.period != 0) return static_cast<int64_t>(index % axis.period);
  return static_cast<int64_t>(index) - static_cast<int64_t>(axis.pad_before);
}

IndexRange TouchedStoreRange(const LoaderGeometry& g, size_t d) {
  const AxisIndexing& axis = g.axes[d];
  if (axis.period != 0 && g.ranges[d].stop > axis.period) return IndexRange{0, axis.period};
  if (axis.padded) return axis.selected;
  return g.ranges[d];
}

std::pair<size_t, uint64_t> TimeSource(const LoaderGeometry& g, size_t c, uint64_t t) {
  const std::vector<ArraySegment>& segments = g.time_segments[c];
  if (segments.empty()) return {g.channel_array[c], t};
  // The last segment beginning at or before t (segments cover the time dimension, in order).
  auto it = std::upper_bound(segments.begin(), segments.end(), t,
                             [](uint64_t index, const ArraySegment& s) { return index < s.begin; });
  const ArraySegment& segment = *(it - 1);
  return {segment.array, t - segment.begin + segment.first};
}

std::optional<size_t> ArrayDimOf(const LoaderGeometry& g, size_t c, size_t d) {
  const Channel& channel = g.channels[c];
  size_t channel_dim = d;
  // The geometry's dimensions the channel lacks: the time dimension of a static field, the member
  // dimension of a channel without members.
  std::optional<size_t> lacks[2];
  if (channel.broadcast && g.time_dim) lacks[0] = g.time_dim;
  if (channel.without_member && g.member_dim) lacks[1] = g.member_dim;
  for (const std::optional<size_t>& lacked : lacks) {
    if (!lacked) continue;
    if (d == *lacked) return std::nullopt;
    if (d > *lacked) --channel_dim;
  }
  // The array's dimensions the channel's lack (its level and stacked members), in increasing
  // order.
  std::optional<size_t> removed[2] = {channel.level_dim, channel.member_dim};
  if (removed[0] && removed[1] && *removed[1] < *removed[0]) std::swap(removed[0], removed[1]);
  for (const std::optional<size_t>& r : removed) {
    if (r && channel_dim >= *r) ++channel_dim;
  }
  return channel_dim;
}

Result<LoaderGeometry> MakeLoaderGeometry(const Dataset& dataset, const LoaderOptions& options,
                                          ThreadPool* pool) {
  LoaderGeometry g;
  const std::string where = "dataset " + dataset.url();
  ZS_ASSIGN_OR_RETURN(const std::string member_dim, MemberDimension(dataset, options, where));
  ZS_RETURN_IF_ERROR(SetChannels(dataset, options, where, member_dim, g));
  ZS_RETURN_IF_ERROR(SetArrays(g));
  ZS_RETURN_IF_ERROR(SetRanges(dataset, options, where, g));
  ZS_RETURN_IF_ERROR(SetFrequency(dataset, options, where, g));
  ZS_RETURN_IF_ERROR(SetSampling(options, where, member_dim, g));
  ZS_RETURN_IF_ERROR(SetTargetSteps(options, where, g));
  SetResident(g);
  ZS_RETURN_IF_ERROR(SetCfDecoding(options.decode_cf, g));
  ZS_RETURN_IF_ERROR(SetMissingDates(dataset, options, where, pool, g));
  ZS_RETURN_IF_ERROR(SetComputedForcings(dataset, where, g));
  SetLayout(g);
  ZS_RETURN_IF_ERROR(SetNormalisation(options.normalize, options.decode_cf, g));
  ZS_RETURN_IF_ERROR(SetTargetTendencies(options, g));
  return g;
}

}  // namespace zarrstream
