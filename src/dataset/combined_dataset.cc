// Several stores as one dataset (Dataset::Join, Dataset::Concat, OpenDatasetForm): which member
// holds each variable, how the members' time axes become the dataset's, and the checks that make
// their other dimensions one grid. Everything is resolved here, when the dataset opens: a channel
// of a combination is a channel of one member's arrays, whose TimeSegments say which array holds
// which run of the time dimension, so the loader's read plan (loader/read_plan.h) takes each
// chunk of a sample from the right store and nothing after it knows about combinations.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "dataset/cf_time.h"
#include "dataset/channel_spec.h"

namespace zarrstream {

namespace {

// The dimensions whose coordinates the members must agree on: not levels or a stacked array's
// channels, which each variable takes from its own store.
bool ComparedDimension(const std::string& dim) {
  return !dim.empty() && !IsLevelDimension(dim) && dim != "channel";
}

std::string TimeLabel(const Coordinate& coordinate, int64_t seconds) {
  return FormatDateTime(FromCalendarSeconds(seconds, coordinate.time_units()->calendar()));
}

std::string VariableList(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 20; ++i) {
    if (i > 0) s += ", ";
    s += names[i];
  }
  if (names.size() > 20) s += ", …";
  return s;
}

// The union of `lists`, sorted.
std::vector<std::string> SortedUnion(const std::vector<const std::vector<std::string>*>& lists) {
  std::vector<std::string> out;
  for (const std::vector<std::string>* list : lists)
    out.insert(out.end(), list->begin(), list->end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

Result<Dataset> Dataset::Join(std::vector<Dataset> members, JoinDates dates) {
  if (members.size() == 1) return std::move(members.front());
  Dataset d;
  d.combination_ = Combination::kJoin;
  d.url_ = "join(";
  std::vector<const std::vector<std::string>*> variables, timed;
  for (const Dataset& m : members) {
    if (d.url_.size() > 5) d.url_ += ", ";
    d.url_ += m.url();
    variables.push_back(&m.variables_);
    timed.push_back(&m.timed_variables_);
    d.identities_.insert(d.identities_.end(), m.identities_.begin(), m.identities_.end());
  }
  d.url_ += ")";
  d.variables_ = SortedUnion(variables);
  d.timed_variables_ = SortedUnion(timed);
  for (const Dataset& m : members) {
    for (const auto& [name, why] : m.unusable_) {
      if (!std::binary_search(d.variables_.begin(), d.variables_.end(), name)) {
        d.unusable_.emplace(name, why);
      }
    }
  }
  d.members_ = std::move(members);
  ZS_RETURN_IF_ERROR(d.CombineAxes(dates == JoinDates::kInner, ""));
  return d;
}

Result<Dataset> Dataset::Concat(std::vector<Dataset> members, std::string_view dim) {
  if (!IsTimeDimension(dim)) {
    return ConfigError("concatenating along '" + std::string(dim) +
                       "': stores are concatenated along a time dimension (time, valid_time, "
                       "init_time, forecast_reference_time)");
  }
  if (members.size() == 1) return std::move(members.front());
  Dataset d;
  d.combination_ = Combination::kConcat;
  d.url_ = "concat(";
  for (const Dataset& m : members) {
    if (d.url_.size() > 7) d.url_ += ", ";
    d.url_ += m.url();
    d.identities_.insert(d.identities_.end(), m.identities_.begin(), m.identities_.end());
  }
  d.url_ += ")";
  // The variables are the first store's; every store must hold those a loader asks for.
  d.variables_ = members.front().variables_;
  d.timed_variables_ = members.front().timed_variables_;
  d.unusable_ = members.front().unusable_;
  d.members_ = std::move(members);
  ZS_RETURN_IF_ERROR(d.CombineAxes(false, dim));
  return d;
}

Status Dataset::CombineAxes(bool inner_time, std::string_view concat_dim) {
  const std::string what = (concat_dim.empty() ? "joining " : "concatenating ") + url_;
  for (const Dataset& m : members_) {
    for (const auto& [dim, extent] : m.dims_) {
      // (An init-capture: clang before 16 cannot capture a structured binding.)
      if (std::none_of(dims_.begin(), dims_.end(),
                       [&name = dim](const auto& known) { return known.first == name; })) {
        dims_.emplace_back(dim, extent);
      }
    }
  }
  time_dim_ = concat_dim;
  for (const auto& [dim, extent] : dims_) {
    if (time_dim_.empty() && IsTimeDimension(dim)) time_dim_ = dim;
  }
  const bool time_combined = inner_time || !concat_dim.empty();
  // Every shared dimension but a combined time axis: the same labels (or, without coordinates,
  // the same extent) in every member that has it.
  for (const auto& [dim, extent] : dims_) {
    if (!ComparedDimension(dim) || (time_combined && dim == time_dim_)) continue;
    std::optional<size_t> reference;
    uint64_t reference_extent = 0;
    std::optional<Coordinate> reference_labels;
    for (size_t k = 0; k < members_.size(); ++k) {
      const Dataset& m = members_[k];
      const auto own =
          std::find_if(m.dims_.begin(), m.dims_.end(),
                       [&name = dim](const auto& known) { return known.first == name; });
      if (own == m.dims_.end()) continue;
      Result<Coordinate> labels = m.LoadCoordinate(dim);
      if (!reference) {
        reference = k;
        reference_extent = own->second;
        if (labels.ok()) reference_labels = *labels;
        continue;
      }
      const std::string& a = members_[*reference].url();
      const std::string& b = m.url();
      if (reference_labels && labels.ok()) {
        const std::optional<uint64_t> at = reference_labels->FirstDifference(*labels);
        if (!at) continue;
        if (*at == std::min(reference_labels->size(), labels->size())) {
          return ConfigError(what + ": dimension '" + dim + "' has " +
                             std::to_string(reference_labels->size()) + " labels in " + a +
                             " and " + std::to_string(labels->size()) + " in " + b);
        }
        return ConfigError(what + ": dimension '" + dim + "' differs at index " +
                           std::to_string(*at) + ": " + reference_labels->FormatLabel(*at) +
                           " in " + a + ", " + labels->FormatLabel(*at) + " in " + b);
      }
      if (own->second != reference_extent) {
        return ConfigError(what + ": dimension '" + dim + "' has extent " +
                           std::to_string(reference_extent) + " in " + a + " and " +
                           std::to_string(own->second) + " in " + b);
      }
    }
  }
  if (!time_combined || time_dim_.empty()) return Status::Ok();

  // The time axis: each member's run of it and where that run starts in the dataset's.
  std::vector<size_t> timed;
  std::vector<Coordinate> times;
  for (size_t k = 0; k < members_.size(); ++k) {
    const Dataset& m = members_[k];
    if (std::none_of(m.dims_.begin(), m.dims_.end(),
                     [&](const auto& known) { return known.first == time_dim_; })) {
      if (!concat_dim.empty()) {
        return ConfigError(what + ": " + m.url() + " has no dimension '" + time_dim_ + "'");
      }
      continue;
    }
    ZS_ASSIGN_OR_RETURN_CTX(Coordinate coordinate, m.LoadCoordinate(time_dim_), what);
    if (!coordinate.is_time()) {
      return ConfigError(what + ": " + coordinate.Describe() +
                         " holds no CF times (or datetime64), which combining stores along " +
                         time_dim_ + " needs");
    }
    if (!times.empty() &&
        coordinate.time_units()->calendar() != times.front().time_units()->calendar()) {
      return ConfigError(what + ": " + coordinate.Describe() + " is of the " +
                         std::string(CalendarName(coordinate.time_units()->calendar())) +
                         " calendar, " + times.front().Describe() + " of the " +
                         std::string(CalendarName(times.front().time_units()->calendar())));
    }
    timed.push_back(k);
    times.push_back(std::move(coordinate));
  }
  member_times_.assign(members_.size(), IndexRange{});
  member_begin_.assign(members_.size(), 0);
  uint64_t extent = 0;
  if (inner_time) {
    std::map<int64_t, size_t> holders;
    for (const Coordinate& c : times) {
      for (uint64_t i = 0; i < c.size(); ++i) ++holders[c.TimeSeconds(i)];
    }
    for (size_t j = 0; j < timed.size(); ++j) {
      const Coordinate& c = times[j];
      std::optional<IndexRange> run;
      for (uint64_t i = 0; i < c.size(); ++i) {
        if (holders[c.TimeSeconds(i)] != timed.size()) continue;
        if (run && run->stop != i) {
          return ConfigError(what + " on the times all hold: they are not one run of " +
                             c.Describe() + " (" + c.FormatLabel(run->stop - 1) + " at index " +
                             std::to_string(run->stop - 1) + ", then " + c.FormatLabel(i) +
                             " at index " + std::to_string(i) + ")");
        }
        if (!run) run = IndexRange{i, i};
        run->stop = i + 1;
      }
      if (!run) {
        return ConfigError(what + " on the times all hold: there are none (" +
                           times.front().Describe() + " runs from " + times.front().FormatLabel(0) +
                           ", " + c.Describe() + " from " + c.FormatLabel(0) + ")");
      }
      member_times_[timed[j]] = *run;
      extent = run->size();
    }
    time_coordinate_ = times.front().Slice(member_times_[timed.front()]);
  } else {
    for (size_t j = 0; j < timed.size(); ++j) {
      const Coordinate& c = times[j];
      if (c.size() == 0) return ConfigError(what + ": " + c.Describe() + " is empty");
      if (j > 0) {
        const Coordinate& before = times[j - 1];
        const int64_t last = before.TimeSeconds(before.size() - 1);
        const int64_t first = c.TimeSeconds(0);
        const std::string& a = members_[timed[j - 1]].url();
        const std::string& b = members_[timed[j]].url();
        if (first <= last) {
          return ConfigError(what + ": " + a + " and " + b + " overlap: " + a + " runs to " +
                             TimeLabel(c, last) + " and " + b + " starts at " +
                             TimeLabel(c, first) +
                             " (each store must start after the one "
                             "before it ends, in order)");
        }
        // The step of the store before (or of this one, where that has a single time).
        const std::optional<int64_t> step =
            before.size() >= 2
                ? std::optional<int64_t>(last - before.TimeSeconds(before.size() - 2))
            : c.size() >= 2 ? std::optional<int64_t>(c.TimeSeconds(1) - first)
                            : std::nullopt;
        if (step && first - last > *step) {
          return ConfigError(what + ": there is a gap between " + a + " and " + b + ": " + a +
                             " ends at " + TimeLabel(c, last) + ", " + b + " starts at " +
                             TimeLabel(c, first) + ", and neither holds " +
                             TimeLabel(c, last + *step) + " (one step of " + std::to_string(*step) +
                             " s after " + a + "'s last time)");
        }
        if (step && first - last != *step) {
          return ConfigError(what + ": " + b + " starts at " + TimeLabel(c, first) +
                             ", not one step (" + std::to_string(*step) + " s) after " + a +
                             "'s last time " + TimeLabel(c, last));
        }
      }
      member_times_[timed[j]] = IndexRange{0, c.size()};
      member_begin_[timed[j]] = extent;
      extent += c.size();
    }
    ZS_ASSIGN_OR_RETURN(time_coordinate_, Coordinate::Concat(times, "dataset " + url_));
  }
  for (auto& [dim, size] : dims_) {
    if (dim == time_dim_) size = extent;
  }
  return Status::Ok();
}

Channel Dataset::MapTime(Channel channel, size_t k) const {
  if (member_times_.empty()) return channel;  // the members' time axes are the dataset's
  const auto time = std::find(channel.dims.begin(), channel.dims.end(), time_dim_);
  if (time == channel.dims.end()) return channel;
  const auto d = static_cast<size_t>(time - channel.dims.begin());
  std::vector<TimeSegment> source = std::move(channel.time_segments);
  if (source.empty()) source.push_back(TimeSegment{0, channel.shape[d], 0, channel.array});
  const IndexRange run = member_times_[k];
  for (TimeSegment& segment : source) {
    const uint64_t lo = std::max(segment.begin, run.start);
    const uint64_t hi = std::min(segment.end, run.stop);
    if (lo >= hi) continue;
    channel.time_segments.push_back(
        TimeSegment{lo - run.start + member_begin_[k], hi - run.start + member_begin_[k],
                    segment.first + (lo - segment.begin), std::move(segment.array)});
  }
  channel.shape[d] = time_coordinate_->size();
  channel.array = channel.time_segments.front().array;
  return channel;
}

Result<std::vector<Channel>> Dataset::ResolveInMembers(const VariableSpec& spec) const {
  if (combination_ == Combination::kConcat) return ResolveInConcat(spec);
  for (size_t k = 0; k < members_.size(); ++k) {
    const Dataset& m = members_[k];
    const bool holds =
        std::find(m.variables_.begin(), m.variables_.end(), spec.variable) != m.variables_.end() ||
        m.unusable_.count(spec.variable) != 0;
    Result<std::vector<Channel>> channels = m.ResolveOne(spec);
    if (!holds && !channels.ok() && channels.status().code() == ErrorCode::kNotFound) continue;
    ZS_RETURN_IF_ERROR(channels.status());
    std::vector<Channel> out;
    for (Channel& c : *channels) out.push_back(MapTime(std::move(c), k));
    return out;
  }
  std::string s =
      "no variable or channel '" + spec.variable + "' in any store of " + Describe() + " (";
  for (size_t k = 0; k < members_.size(); ++k) {
    if (k > 0) s += "; ";
    s += members_[k].url() + ": " + VariableList(members_[k].variables_);
  }
  return NotFoundError(s + ")");
}

Result<std::vector<Channel>> Dataset::ResolveInConcat(const VariableSpec& spec) const {
  std::vector<Channel> out;
  for (size_t k = 0; k < members_.size(); ++k) {
    const Dataset& m = members_[k];
    ZS_ASSIGN_OR_RETURN_CTX(std::vector<Channel> channels, m.ResolveOne(spec),
                            "concatenated " + Describe());
    if (k == 0) {
      for (Channel& c : channels) out.push_back(MapTime(std::move(c), k));
      continue;
    }
    for (size_t i = 0; i < std::max(channels.size(), out.size()); ++i) {
      if (i >= channels.size() || i >= out.size() || channels[i].name != out[i].name) {
        return ConfigError("concatenated " + Describe() + ": '" + spec.ToString() +
                           "' names other channels in " + m.url() + " than in " +
                           members_.front().url() + " (" +
                           (i < channels.size() ? "'" + channels[i].name + "'" : "none") +
                           " against " + (i < out.size() ? "'" + out[i].name + "'" : "none") + ")");
      }
      Channel& have = out[i];
      const Channel& next = channels[i];
      const auto time = std::find(have.dims.begin(), have.dims.end(), time_dim_);
      bool same = next.dims == have.dims && next.array.dtype() == have.array.dtype() &&
                  next.shape.size() == have.shape.size();
      for (size_t d = 0; same && d < have.shape.size(); ++d) {
        same = have.dims[d] == time_dim_ || next.shape[d] == have.shape[d];
      }
      if (!same) {
        return ConfigError("concatenated " + Describe() + ": channel '" + have.name + "' is " +
                           std::string(DataTypeName(next.array.dtype())) + " of dimensions " +
                           VariableList(next.dims) + " in " + m.url() + ", " +
                           std::string(DataTypeName(have.array.dtype())) + " of " +
                           VariableList(have.dims) + " in " + members_.front().url() +
                           " (the stores must hold the same grid and types)");
      }
      if (time == have.dims.end()) continue;  // a static field: the first store's
      Channel mapped = MapTime(next, k);
      for (TimeSegment& segment : mapped.time_segments) {
        have.time_segments.push_back(std::move(segment));
      }
    }
  }
  return out;
}

namespace {

Result<Dataset> OpenForm(const nlohmann::json& form, const OpenOptions& options,
                         std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return ConfigError("dataset '" + std::string(text) + "': " + why +
                       " (a dataset is a store's URL or {\"url\": ..., \"ref\": ...}, a list of "
                       "datasets to join, {\"join\": "
                       "[...], \"mode\": \"inner\"} or {\"concat\": [...], \"dim\": \"time\"})");
  };
  if (form.is_string()) return Dataset::Open(form.get<std::string>(), options);
  const auto open_members = [&](const nlohmann::json& list) -> Result<std::vector<Dataset>> {
    if (!list.is_array() || list.empty()) return bad("a combination needs a list of datasets");
    std::vector<Dataset> members;
    for (const nlohmann::json& member : list) {
      ZS_ASSIGN_OR_RETURN(Dataset opened, OpenForm(member, options, text));
      members.push_back(std::move(opened));
    }
    return members;
  };
  if (form.is_array()) {
    ZS_ASSIGN_OR_RETURN(std::vector<Dataset> members, open_members(form));
    return Dataset::Join(std::move(members), JoinDates::kExact);
  }
  if (!form.is_object()) return bad("unexpected " + std::string(form.type_name()));
  if (form.contains("url")) {
    // One store with a ref of its own: an Icechunk repository at a branch, tag or snapshot.
    for (const auto& [key, value] : form.items()) {
      if ((key != "url" && key != "ref") || !value.is_string()) {
        return bad("a store is {\"url\": \"...\", \"ref\": \"...\"}, not " + form.dump());
      }
    }
    OpenOptions own = options;
    own.ref = form.value("ref", options.ref);
    return Dataset::Open(form["url"].get<std::string>(), own);
  }
  const bool join = form.contains("join");
  const bool concat = form.contains("concat");
  if (join == concat) return bad("name either \"join\" or \"concat\"");
  for (const auto& [key, value] : form.items()) {
    if (key != (join ? "join" : "concat") && key != (join ? "mode" : "dim")) {
      return bad("unknown key \"" + key + "\"");
    }
  }
  ZS_ASSIGN_OR_RETURN(std::vector<Dataset> members, open_members(form[join ? "join" : "concat"]));
  if (join) {
    const nlohmann::json mode = form.value("mode", nlohmann::json("exact"));
    if (mode != "exact" && mode != "inner") {
      return bad("join mode " + mode.dump() + ": expected \"exact\" or \"inner\"");
    }
    return Dataset::Join(std::move(members),
                         mode == "inner" ? JoinDates::kInner : JoinDates::kExact);
  }
  const nlohmann::json dim = form.value("dim", nlohmann::json("time"));
  if (!dim.is_string()) return bad("\"dim\" is " + dim.dump() + ", not a dimension's name");
  return Dataset::Concat(std::move(members), dim.get<std::string>());
}

}  // namespace

Result<Dataset> OpenDatasetForm(std::string_view json, const OpenOptions& options) {
  nlohmann::json form = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (form.is_discarded()) {
    return ConfigError("dataset '" + std::string(json) +
                       "': text starting with '[' or '{' is a dataset form, and this is not JSON");
  }
  return OpenForm(form, options, json);
}

std::string JoinedDatasetText(const std::vector<std::string>& urls, JoinDates dates) {
  if (urls.size() == 1) return urls.front();
  nlohmann::json form = {{"join", urls}};
  if (dates == JoinDates::kInner) form["mode"] = "inner";
  return form.dump();
}

}  // namespace zarrstream
