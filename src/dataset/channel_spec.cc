// Variable specs, data variables of a dataset, and channel resolution.
#include "dataset/channel_spec.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <set>

#include "array/array_state.h"
#include "store/curl_transport.h"
#include "store/icechunk_store.h"
#include "store/reference_store.h"
#include "store/sigv4.h"

namespace zarrstream {

namespace {

constexpr std::string_view kChannelDim = "channel";
constexpr std::string_view kChannelNamesAttribute = "channel_names";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<double> ParseNumber(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

Status BadSpec(std::string_view piece, std::string_view why) {
  std::string s = "invalid variable '";
  s += piece;
  s += "': ";
  s += why;
  s += " (expected NAME, NAME@LEVEL[,LEVEL...] or NAME@*)";
  return InvalidArgumentError(std::move(s));
}

std::string JoinNames(const std::vector<std::string>& names, size_t limit = 40) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < limit; ++i) {
    if (i > 0) s += ", ";
    s += names[i];
  }
  if (names.size() > limit) s += ", … (" + std::to_string(names.size()) + " in all)";
  return s;
}

std::string DimsString(const std::vector<std::string>& dims, const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ", ";
    s += dims[i];
    s += "=";
    s += std::to_string(shape[i]);
  }
  s += ")";
  return s;
}

// The stacked array's channel dimension and names, or nullopt when `array` is not stacked.
Result<std::optional<std::pair<size_t, std::vector<std::string>>>> StackedLayout(
    const Array& array, std::string_view name) {
  const auto& dims = array.dims();
  const auto it = std::find(dims.begin(), dims.end(), kChannelDim);
  if (it == dims.end()) return std::optional<std::pair<size_t, std::vector<std::string>>>();
  const size_t dim = static_cast<size_t>(it - dims.begin());
  const nlohmann::json& attributes = array.state().metadata.attributes;
  const auto names = attributes.find(kChannelNamesAttribute);
  std::string where = "array '";
  where += name;
  where += "' has a '";
  where += kChannelDim;
  where += "' dimension";
  if (names == attributes.end()) {
    return InvalidArgumentError(where + " but no \"channel_names\" attribute naming its channels");
  }
  std::vector<std::string> list;
  if (names->is_array()) {
    for (const auto& n : *names) {
      if (!n.is_string()) break;
      list.push_back(n.get<std::string>());
    }
  }
  if (!names->is_array() || list.size() != names->size() || list.size() != array.shape()[dim]) {
    return InvalidArgumentError(where + " of size " + std::to_string(array.shape()[dim]) +
                                " but its \"channel_names\" is not a list of that many strings");
  }
  return std::optional<std::pair<size_t, std::vector<std::string>>>(
      std::make_pair(dim, std::move(list)));
}

// Splits a stacked channel name "temperature@500" into its variable and level.
void SplitChannelName(const std::string& name, Channel* channel) {
  const size_t at = name.rfind('@');
  channel->variable = at == std::string::npos ? name : name.substr(0, at);
  if (at != std::string::npos) channel->level = ParseNumber(name.substr(at + 1));
}

void FillDims(const Array& array, Channel* channel) {
  channel->dims.clear();
  channel->shape.clear();
  for (size_t d = 0; d < array.rank(); ++d) {
    if (channel->level_dim && d == *channel->level_dim) continue;
    channel->dims.push_back(array.dims()[d]);
    channel->shape.push_back(array.shape()[d]);
  }
}

}  // namespace

std::string VariableSpec::ToString() const {
  std::string s = variable;
  if (levels == Levels::kAll) s += "@*";
  for (size_t i = 0; i < level_labels.size(); ++i) {
    s += i == 0 ? "@" : ",";
    s += level_labels[i];
  }
  return s;
}

Result<std::vector<VariableSpec>> ParseVariableSpecs(std::span<const std::string> args) {
  std::vector<VariableSpec> specs;
  for (const std::string& arg : args) {
    bool in_level_list = false;
    std::string_view rest = arg;
    while (true) {
      const size_t comma = rest.find(',');
      const std::string_view piece = Trim(rest.substr(0, comma));
      if (in_level_list && ParseNumber(piece)) {
        specs.back().level_labels.emplace_back(piece);
      } else {
        VariableSpec spec;
        const size_t at = piece.find('@');
        spec.variable = std::string(Trim(piece.substr(0, at)));
        if (spec.variable.empty()) return BadSpec(piece, "no variable name");
        if (at != std::string_view::npos) {
          const std::string_view level = Trim(piece.substr(at + 1));
          if (level == "*") {
            spec.levels = VariableSpec::Levels::kAll;
          } else if (ParseNumber(level)) {
            spec.levels = VariableSpec::Levels::kList;
            spec.level_labels.emplace_back(level);
          } else {
            return BadSpec(piece, "a level must be a number or '*'");
          }
        }
        in_level_list = spec.levels == VariableSpec::Levels::kList;
        specs.push_back(std::move(spec));
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return specs;
}

bool IsLevelDimension(std::string_view dim) {
  return dim == "level" || dim == "pressure_level" || dim == "isobaricInhPa" || dim == "plev";
}

bool IsTimeDimension(std::string_view dim) {
  return dim == "time" || dim == "valid_time" || dim == "init_time" ||
         dim == "forecast_reference_time";
}

bool IsMemberDimension(std::string_view dim) {
  return dim == "number" || dim == "member" || dim == "ensemble" || dim == "realization";
}

bool HasTimeDimension(const std::vector<std::string>& dims) {
  return std::any_of(dims.begin(), dims.end(),
                     [](const std::string& dim) { return IsTimeDimension(dim); });
}

bool IsUnfinishedRechunk(const nlohmann::json& attributes) {
  if (!attributes.is_object()) return false;
  const auto marker = attributes.find(std::string(kUnfinishedRechunkAttribute));
  return marker != attributes.end() && *marker == std::string(kUnfinishedRechunkValue);
}

namespace {

// An error where `attributes` (of the group or array at `url`) carry kUnfinishedRechunkAttribute.
Status RefuseUnfinishedRechunk(const nlohmann::json& attributes, std::string_view url) {
  if (!IsUnfinishedRechunk(attributes)) return Status::Ok();
  return InvalidArgumentError(
      RedactUrl(url) +
      " is the destination of a `zarrstream rechunk` job that has not finished "
      "(its attribute " +
      std::string(kUnfinishedRechunkAttribute) + " is \"" + std::string(kUnfinishedRechunkValue) +
      "\"): chunks not yet written would read as fill "
      "values. Finish the job first: rerun the same rechunk command (it resumes), run its "
      "remaining parts, or finalise it (plan.finalise() in Python)");
}

}  // namespace

Result<Dataset> Dataset::Open(std::string_view url, const OpenOptions& options) {
  const size_t text = url.find_first_not_of(" \t\n");
  if (text != std::string_view::npos && (url[text] == '[' || url[text] == '{')) {
    return OpenDatasetForm(url, options);
  }
  Result<Group> group = Group::Open(url, options);
  if (!group.ok() && group.status().code() != ErrorCode::kInvalidArgument) return group.status();
  if (group.ok()) {
    ZS_RETURN_IF_ERROR(RefuseUnfinishedRechunk(group->state().metadata.attributes, group->url()));
  }
  Result<Dataset> dataset = group.ok() ? FromGroup(*group) : OpenArrayDataset(url, options);
  // Recorded as given: the URL a user names the store by, not the one it was normalised to, but
  // without a user:password in it (states, logs and reports show it).
  if (dataset.ok()) dataset->identities_.front().url = RedactUrl(url);
  return dataset;
}

Result<Dataset> Dataset::OpenArrayDataset(std::string_view url, const OpenOptions& options) {
  ZS_ASSIGN_OR_RETURN(Array array, Array::Open(url, options));
  ZS_RETURN_IF_ERROR(RefuseUnfinishedRechunk(array.state().metadata.attributes, array.url()));
  // The variable of a lone array is named after its URL's last component ("t2m.zarr" → "t2m").
  std::string_view name = url;
  while (!name.empty() && name.back() == '/') name.remove_suffix(1);
  name = name.substr(name.rfind('/') == std::string_view::npos ? 0 : name.rfind('/') + 1);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".zarr") name.remove_suffix(5);
  return FromArray(array, std::string(name));
}

namespace {

// The identity of the data `store` holds, whose metadata documents (as StoreIdentity describes
// them) have the digest `metadata_sha256`.
StoreIdentity IdentityOf(const Store& store, std::string url, std::string metadata_sha256) {
  if (const auto* snapshot = dynamic_cast<const IcechunkStore*>(&store)) {
    return {std::move(url), "icechunk", snapshot->snapshot().id};
  }
  if (const auto* references = dynamic_cast<const ReferenceStore*>(&store)) {
    return {std::move(url), "kerchunk", references->content_sha256()};
  }
  return {std::move(url), "zarr", std::move(metadata_sha256)};
}

// The error for using `array` (`what`), of a type beyond the numeric core, as a channel.
Status NonNumericError(const Array& array, const std::string& what) {
  return InvalidArgumentError(what + " holds " + array.extended_type()->Name() +
                              " values; channels are numeric (strings and datetime64 are read on "
                              "the CPU only: open_array(...).read())");
}

}  // namespace

Result<Dataset> Dataset::FromGroup(const Group& group) {
  Dataset dataset;
  dataset.url_ = group.url();
  dataset.group_ = group;
  std::set<std::string> coordinates;
  std::vector<Array> arrays;
  std::vector<std::string> names;
  for (const std::string& name : group.array_names()) {
    Result<Array> opened = group.OpenArray(name);
    if (!opened.ok()) {
      // One member this reader cannot open (an unknown data type or codec) must not hide the
      // rest of the dataset; naming it is the error.
      if (opened.status().code() != ErrorCode::kUnsupported) {
        return opened.status().WithContext("opening dataset at " + group.url());
      }
      dataset.unusable_.emplace(name, opened.status());
      continue;
    }
    Array array = std::move(opened).value();
    for (const std::string& dim : array.dims()) coordinates.insert(dim);
    const nlohmann::json& attributes = array.state().metadata.attributes;
    const auto listed = attributes.find("coordinates");
    if (listed != attributes.end() && listed->is_string()) {
      std::string_view rest = listed->get_ref<const std::string&>();
      while (!rest.empty()) {
        const size_t space = rest.find(' ');
        if (space != 0) coordinates.emplace(rest.substr(0, space));
        if (space == std::string_view::npos) break;
        rest.remove_prefix(space + 1);
      }
    }
    for (size_t d = 0; d < array.dims().size() && d < array.rank(); ++d) {
      const std::string& dim = array.dims()[d];
      if (std::none_of(dataset.dims_.begin(), dataset.dims_.end(),
                       [&](const auto& known) { return known.first == dim; })) {
        dataset.dims_.emplace_back(dim, array.shape()[d]);
      }
    }
    arrays.push_back(std::move(array));
    names.push_back(name);
  }
  std::optional<std::vector<std::string>> shared;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const std::string& name = names[i];
    if (!arrays[i].is_numeric()) {
      dataset.unusable_.emplace(
          name, NonNumericError(arrays[i], "variable '" + name + "' of " + dataset.Describe()));
      continue;
    }
    if (coordinates.count(name) != 0) continue;
    dataset.variables_.push_back(name);
    if (HasTimeDimension(arrays[i].dims())) dataset.timed_variables_.push_back(name);
    std::vector<std::string> own;
    for (const std::string& dim : arrays[i].dims()) {
      // A member dimension need not be shared: a static field of an ensemble has none.
      if (!IsLevelDimension(dim) && !IsTimeDimension(dim) && !IsMemberDimension(dim) &&
          dim != kChannelDim && !dim.empty()) {
        own.push_back(dim);
      }
    }
    if (own.empty()) continue;
    if (!shared) {
      shared = own;
    } else {
      std::erase_if(*shared, [&](const std::string& dim) {
        return std::find(own.begin(), own.end(), dim) == own.end();
      });
    }
  }
  dataset.shared_dims_ = shared.value_or(std::vector<std::string>());
  // Consolidated metadata is in the root's documents; otherwise each array's are its own.
  std::string documents = group.state().metadata.documents_sha256;
  if (!group.consolidated()) {
    for (size_t i = 0; i < arrays.size(); ++i) {
      documents += '\n';
      documents += names[i];
      documents += '\0';
      documents += arrays[i].state().metadata.documents_sha256;
    }
    documents = Sha256Hex(std::as_bytes(std::span(documents)));
  }
  dataset.identities_.push_back(
      IdentityOf(*group.state().store, group.url(), std::move(documents)));
  return dataset;
}

Result<Dataset> Dataset::FromArray(const Array& array, std::string name) {
  Dataset dataset;
  dataset.url_ = array.url();
  dataset.identities_.push_back(
      IdentityOf(*array.state().store, array.url(), array.state().metadata.documents_sha256));
  dataset.single_ = array;
  dataset.variables_.push_back(std::move(name));
  for (size_t d = 0; d < array.dims().size() && d < array.rank(); ++d) {
    dataset.dims_.emplace_back(array.dims()[d], array.shape()[d]);
  }
  for (const std::string& dim : array.dims()) {
    if (IsTimeDimension(dim)) dataset.timed_variables_ = dataset.variables_;
    if (!IsLevelDimension(dim) && !IsTimeDimension(dim) && dim != kChannelDim) {
      dataset.shared_dims_.push_back(dim);
    }
  }
  return dataset;
}

std::vector<std::string> Dataset::DefaultVariableNames() const {
  return timed_variables_.empty() ? variables_ : timed_variables_;
}

std::string Dataset::Describe() const {
  std::string s = is_combined() ? "dataset " : "dataset at ";
  s += url_;
  return s;
}

Result<Array> Dataset::OpenVariable(std::string_view name) const {
  auto unusable = unusable_.find(std::string(name));
  if (unusable != unusable_.end()) return unusable->second;
  if (is_combined()) {
    for (const Dataset& member : members_) {
      const std::vector<std::string>& names = member.variables_;
      if (std::find(names.begin(), names.end(), name) != names.end()) {
        return member.OpenVariable(name);
      }
    }
  } else if (single_) {
    if (name == variables_.front()) return *single_;
  } else if (std::find(variables_.begin(), variables_.end(), name) != variables_.end()) {
    return group_->OpenArray(name);
  }
  std::string s = "no variable '";
  s += name;
  s += "' in ";
  s += Describe();
  s += " (variables: ";
  s += JoinNames(variables_);
  s += ")";
  return NotFoundError(std::move(s));
}

Result<Coordinate> Dataset::LoadCoordinate(std::string_view dim) const {
  if (is_combined()) {
    if (time_coordinate_ && dim == time_dim_) return *time_coordinate_;
    // The members' coordinates of a dimension they share are equal (CombineAxes): the first.
    std::optional<Status> first_error;
    for (const Dataset& member : members_) {
      Result<Coordinate> coordinate = member.LoadCoordinate(dim);
      if (coordinate.ok()) return coordinate;
      if (!first_error) first_error = coordinate.status();
    }
    return *first_error;
  }
  if (!group_) {
    std::string s = "cannot select on '";
    s += dim;
    s += "': ";
    s += Describe();
    s += " is a single array, with no coordinate arrays (open its group instead)";
    return InvalidArgumentError(std::move(s));
  }
  return Coordinate::Load(*group_, dim);
}

Result<std::vector<Channel>> Dataset::StackedChannels(const std::string& array_name,
                                                      const Array& array) const {
  ZS_ASSIGN_OR_RETURN(auto layout, StackedLayout(array, array_name));
  std::vector<Channel> channels;
  if (!layout) return channels;
  for (uint64_t i = 0; i < layout->second.size(); ++i) {
    Channel channel(array_name, array);
    channel.name = layout->second[i];
    SplitChannelName(channel.name, &channel);
    channel.level_dim = layout->first;
    channel.level_index = i;
    FillDims(array, &channel);
    channels.push_back(std::move(channel));
  }
  return channels;
}

namespace {

// The level dimension of variable `array` (`what` names it in errors), nullopt when it has none;
// an error for a second level dimension or a dimension that is neither level, time nor one of
// `shared_dims`.
Result<std::optional<size_t>> FindLevelDimension(const Array& array, const std::string& what,
                                                 const std::vector<std::string>& shared_dims) {
  std::optional<size_t> level_dim;
  for (size_t d = 0; d < array.rank(); ++d) {
    const std::string& dim = array.dims()[d];
    if (IsLevelDimension(dim)) {
      if (level_dim) {
        std::string s = what;
        s += " has two level dimensions, '";
        s += array.dims()[*level_dim];
        s += "' and '";
        s += dim;
        s += "'";
        return InvalidArgumentError(std::move(s));
      }
      level_dim = d;
    } else if (!IsTimeDimension(dim) && !IsMemberDimension(dim) &&
               std::find(shared_dims.begin(), shared_dims.end(), dim) == shared_dims.end()) {
      std::string s = what;
      s += " has dimension '";
      s += dim;
      s += "', which is neither a level dimension (level, pressure_level, isobaricInhPa, plev), ";
      s += "a time dimension, a member dimension (number, member, ensemble, realization), ";
      s += "nor shared by every data variable (";
      s += JoinNames(shared_dims);
      s += ")";
      return InvalidArgumentError(std::move(s));
    }
  }
  return level_dim;
}

// The channels of `base`'s variable that `spec` names (all its levels unless it lists some), one
// per level of coordinate `levels`.
Result<std::vector<Channel>> LevelChannels(const VariableSpec& spec, const Channel& base,
                                           const Coordinate& levels) {
  std::vector<uint64_t> indices;
  if (spec.levels == VariableSpec::Levels::kList) {
    ZS_ASSIGN_OR_RETURN_CTX(indices, levels.SelectValues(spec.level_labels),
                            "variable '" + spec.ToString() + "'");
  } else {
    for (uint64_t i = 0; i < levels.size(); ++i) indices.push_back(i);
  }
  std::vector<Channel> channels;
  for (uint64_t index : indices) {
    Channel channel = base;
    channel.level_index = index;
    channel.level = levels.NumericValue(index);
    channel.name = spec.variable + "@" + levels.FormatLabel(index);
    channels.push_back(std::move(channel));
  }
  return channels;
}

// The channels among `all_stacked` (the stacked arrays' channels of `dataset`, whose variables are
// `variables`) that `spec` names: a channel by its name, or the channels of a variable, picked by
// level when `spec` lists levels.
Result<std::vector<Channel>> PickStackedChannels(const VariableSpec& spec,
                                                 const std::vector<Channel>& all_stacked,
                                                 const std::vector<std::string>& variables,
                                                 const std::string& dataset) {
  std::vector<Channel> matched;
  if (spec.levels == VariableSpec::Levels::kUnspecified) {
    for (const Channel& c : all_stacked) {
      if (c.name == spec.variable) matched.push_back(c);
    }
  }
  if (matched.empty()) {
    for (const Channel& c : all_stacked) {
      if (c.variable == spec.variable && c.name != c.variable) matched.push_back(c);
    }
  }
  if (matched.empty()) {
    std::vector<std::string> available = variables;
    for (const Channel& c : all_stacked) available.push_back(c.name);
    std::string s = "no variable or channel '";
    s += spec.variable;
    s += "' in ";
    s += dataset;
    s += " (available: ";
    s += JoinNames(available);
    s += ")";
    return NotFoundError(std::move(s));
  }
  if (spec.levels != VariableSpec::Levels::kList) return matched;
  std::vector<Channel> picked;
  for (const std::string& label : spec.level_labels) {
    const double level = *ParseNumber(label);
    auto it = std::find_if(matched.begin(), matched.end(),
                           [&](const Channel& c) { return c.level && *c.level == level; });
    if (it == matched.end()) {
      std::vector<std::string> names;
      names.reserve(matched.size());
      for (const Channel& c : matched) names.push_back(c.name);
      std::string s = "no channel '";
      s += spec.variable;
      s += "@";
      s += label;
      s += "' in ";
      s += dataset;
      s += " (channels of '";
      s += spec.variable;
      s += "': ";
      s += JoinNames(names);
      s += ")";
      return NotFoundError(std::move(s));
    }
    picked.push_back(*it);
  }
  return picked;
}

}  // namespace

Result<std::vector<Channel>> Dataset::ResolveOne(const VariableSpec& spec) const {
  if (is_combined()) return ResolveInMembers(spec);
  auto unusable = unusable_.find(spec.variable);
  if (unusable != unusable_.end()) return unusable->second;
  const bool is_variable =
      std::find(variables_.begin(), variables_.end(), spec.variable) != variables_.end();
  if (!is_variable) {
    // Not a variable: a channel (or the channels of a variable) inside stacked arrays.
    std::vector<Channel> all_stacked;
    for (const std::string& name : variables_) {
      ZS_ASSIGN_OR_RETURN(Array array, OpenVariable(name));
      ZS_ASSIGN_OR_RETURN(std::vector<Channel> stacked, StackedChannels(name, array));
      for (Channel& c : stacked) all_stacked.push_back(std::move(c));
    }
    return PickStackedChannels(spec, all_stacked, variables_, Describe());
  }
  ZS_ASSIGN_OR_RETURN(Array array, OpenVariable(spec.variable));
  const std::string what = "variable '" + spec.variable + "' of " + Describe();
  if (!array.is_numeric()) return NonNumericError(array, what);
  if (array.dims().empty() && array.rank() > 0) {
    return InvalidArgumentError(what +
                                " has no dimension names (v3 dimension_names or v2 "
                                "_ARRAY_DIMENSIONS), so it cannot be part of a dataset");
  }
  ZS_ASSIGN_OR_RETURN(std::vector<Channel> stacked, StackedChannels(spec.variable, array));
  if (!stacked.empty()) {
    if (spec.levels == VariableSpec::Levels::kList) {
      return InvalidArgumentError(what + " is a stacked array of channels; name its channels (" +
                                  JoinNames({stacked.front().name}) + ", …) instead of levels");
    }
    return stacked;
  }
  ZS_ASSIGN_OR_RETURN(std::optional<size_t> level_dim,
                      FindLevelDimension(array, what, shared_dims_));
  Channel base(spec.variable, array);
  base.variable = spec.variable;
  if (!level_dim) {
    if (spec.levels != VariableSpec::Levels::kUnspecified) {
      return InvalidArgumentError(
          what + " has no level dimension (its dimensions: " + JoinNames(array.dims()) + "), so '" +
          spec.ToString() + "' names levels it does not have");
    }
    base.name = spec.variable;
    FillDims(array, &base);
    return std::vector<Channel>{std::move(base)};
  }
  const std::string& level_name = array.dims()[*level_dim];
  ZS_ASSIGN_OR_RETURN_CTX(Coordinate levels, LoadCoordinate(level_name),
                          "naming the levels of " + what);
  if (levels.is_text()) {
    return InvalidArgumentError("level coordinate '" + level_name + "' of " + Describe() +
                                " holds text, not numeric levels");
  }
  if (levels.is_time()) {
    return InvalidArgumentError("level coordinate '" + level_name + "' of " + Describe() +
                                " holds times, not levels");
  }
  if (levels.size() != array.shape()[*level_dim]) {
    return InvalidArgumentError(what + " has " + std::to_string(array.shape()[*level_dim]) +
                                " levels but coordinate '" + level_name + "' has " +
                                std::to_string(levels.size()));
  }
  base.level_dim = level_dim;
  FillDims(array, &base);
  return LevelChannels(spec, base, levels);
}

std::vector<std::string> Dataset::dimension_names() const {
  std::vector<std::string> names;
  for (const auto& [name, extent] : dims_) names.push_back(name);
  return names;
}

Result<std::vector<Channel>> Dataset::ResolveChannels(std::span<const VariableSpec> specs,
                                                      std::string_view member_dim) const {
  std::vector<VariableSpec> defaults;
  if (specs.empty()) {
    for (const std::string& name : DefaultVariableNames()) {
      defaults.push_back(VariableSpec{name, {}, {}});
    }
    specs = defaults;
  }
  std::vector<Channel> channels;
  for (const VariableSpec& spec : specs) {
    ZS_ASSIGN_OR_RETURN(std::vector<Channel> resolved, ResolveOne(spec));
    for (Channel& c : resolved) channels.push_back(std::move(c));
  }
  if (channels.empty()) return InvalidArgumentError(Describe() + " has no data variables");
  // The channels' dimensions are those of the first time-dependent one (with the member
  // dimension, when one is given and some channel has it); a static field matches them without
  // the time dimension, and a channel without the member dimension them without it.
  const auto has_member = [&](const Channel& c) {
    return std::find(c.dims.begin(), c.dims.end(), member_dim) != c.dims.end();
  };
  const Channel* reference = &channels.front();
  for (const bool need_member : {!member_dim.empty(), false}) {
    const auto it = std::find_if(channels.begin(), channels.end(), [&](const Channel& c) {
      return HasTimeDimension(c.dims) && (!need_member || has_member(c));
    });
    if (it != channels.end()) {
      reference = &*it;
      break;
    }
  }
  // The reference's dimensions without those named: `without_time`, `without_member`.
  const auto reduced = [&](bool without_time, bool without_member) {
    std::pair<std::vector<std::string>, std::vector<uint64_t>> out;
    for (size_t d = 0; d < reference->dims.size(); ++d) {
      if (without_time && IsTimeDimension(reference->dims[d])) continue;
      if (without_member && !member_dim.empty() && reference->dims[d] == member_dim) continue;
      out.first.push_back(reference->dims[d]);
      out.second.push_back(reference->shape[d]);
    }
    return out;
  };
  const auto [static_dims, static_shape] = reduced(true, false);
  const bool timed = static_dims.size() != reference->dims.size();
  const bool members = !member_dim.empty() && has_member(*reference);
  std::set<std::string> seen;
  for (Channel& c : channels) {
    if (!seen.insert(c.name).second) {
      return InvalidArgumentError("channel '" + c.name + "' of " + Describe() +
                                  " is selected twice");
    }
    if (c.dims == reference->dims && c.shape == reference->shape) continue;
    if (timed && c.dims == static_dims && c.shape == static_shape) {
      c.broadcast = true;
      continue;
    }
    if (members) {
      const auto [timed_dims, timed_shape] = reduced(false, true);
      const auto [field_dims, field_shape] = reduced(true, true);
      if (c.dims == timed_dims && c.shape == timed_shape) {
        c.without_member = true;
        continue;
      }
      if (timed && c.dims == field_dims && c.shape == field_shape) {
        c.broadcast = c.without_member = true;
        continue;
      }
    }
    std::string why = " (a channel's dimensions, without its level, must match to stack";
    why += timed ? "; a static field's, without the time dimension)" : ")";
    return InvalidArgumentError("channels of " + Describe() + " have different dimensions: '" +
                                reference->name + "' has " +
                                DimsString(reference->dims, reference->shape) + ", '" + c.name +
                                "' has " + DimsString(c.dims, c.shape) + why);
  }
  return channels;
}

}  // namespace zarrstream
