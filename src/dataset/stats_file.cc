// The stats file: formatting and parsing (format in stats_file.h).
#include "dataset/stats_file.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace zarrstream {

namespace {

using nlohmann::ordered_json;

constexpr std::string_view kFormat = "zarrstream.stats/1";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Reads a number field that may be null (NaN).
Result<double> NumberOrNull(const ordered_json& object, const std::string& field,
                            const std::string& path) {
  const auto it = object.find(field);
  if (it == object.end())
    return InvalidArgumentError("stats file: " + path + "." + field + ": missing");
  if (it->is_null()) return kNaN;
  if (!it->is_number()) {
    return InvalidArgumentError("stats file: " + path + "." + field +
                                ": expected a number or null, got " + it->dump());
  }
  return it->get<double>();
}

Result<uint64_t> Count(const ordered_json& object, const std::string& field,
                       const std::string& path) {
  const auto it = object.find(field);
  if (it == object.end() || !it->is_number_unsigned()) {
    return InvalidArgumentError("stats file: " + path + "." + field +
                                ": expected a non-negative integer");
  }
  return it->get<uint64_t>();
}

Result<std::string> String(const ordered_json& object, const std::string& field,
                           const std::string& path) {
  const auto it = object.find(field);
  if (it == object.end() || !it->is_string()) {
    return InvalidArgumentError("stats file: " + path + (path.empty() ? "" : ".") + field +
                                ": expected a string");
  }
  return it->get<std::string>();
}

ordered_json NumberOrNullJson(double value) {
  return std::isfinite(value) ? ordered_json(value) : ordered_json(nullptr);
}

// A numeric label as a JSON number ("500" → 500, "0.25" → 0.25); text that JSON cannot hold as a
// number ("inf") stays a string.
ordered_json LabelJson(const std::string& label, bool numeric) {
  if (!numeric) return label;
  ordered_json number = ordered_json::parse(label, nullptr, /*allow_exceptions=*/false);
  return number.is_number() ? number : ordered_json(label);
}

// A channel's "tendencies": {"6": {count, nan_count, mean, std, min, max}, ...} (absent: none).
Result<std::vector<TendencyStats>> ParseTendencies(const ordered_json& channel,
                                                   const std::string& path) {
  std::vector<TendencyStats> out;
  const auto tendencies = channel.find("tendencies");
  if (tendencies == channel.end()) return out;
  if (!tendencies->is_object()) {
    return InvalidArgumentError("stats file: " + path + ".tendencies: expected an object");
  }
  for (const auto& [key, value] : tendencies->items()) {
    const std::string where = path + ".tendencies." + key;
    TendencyStats t;
    const bool digits = !key.empty() && key.size() <= 18 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (t.steps = std::stoull(key)) == 0) {
      return InvalidArgumentError("stats file: " + where +
                                  ": expected a positive number of time steps as the key");
    }
    if (!value.is_object())
      return InvalidArgumentError("stats file: " + where + ": expected an object");
    ZS_ASSIGN_OR_RETURN(t.count, Count(value, "count", where));
    ZS_ASSIGN_OR_RETURN(t.nan_count, Count(value, "nan_count", where));
    ZS_ASSIGN_OR_RETURN(t.mean, NumberOrNull(value, "mean", where));
    ZS_ASSIGN_OR_RETURN(t.std, NumberOrNull(value, "std", where));
    ZS_ASSIGN_OR_RETURN(t.min, NumberOrNull(value, "min", where));
    ZS_ASSIGN_OR_RETURN(t.max, NumberOrNull(value, "max", where));
    out.push_back(t);
  }
  return out;
}

}  // namespace

std::string FormatChannelStats(const ChannelStatsFile& stats) {
  ordered_json select = ordered_json::object();
  for (const SelectedLabels& s : stats.select) {
    ordered_json labels = ordered_json::array();
    for (const std::string& label : s.labels) labels.push_back(LabelJson(label, s.numeric));
    select[s.dim] = s.is_range ? labels : ordered_json{{"values", labels}};
  }
  ordered_json channels = ordered_json::array();
  for (const ChannelStats& c : stats.channels) {
    ordered_json channel;
    channel["name"] = c.name;
    channel["variable"] = c.variable;
    channel["level"] = c.level ? ordered_json(*c.level) : ordered_json(nullptr);
    channel["count"] = c.count;
    channel["nan_count"] = c.nan_count;
    channel["mean"] = NumberOrNullJson(c.mean);
    channel["std"] = NumberOrNullJson(c.std);
    channel["min"] = NumberOrNullJson(c.min);
    channel["max"] = NumberOrNullJson(c.max);
    if (!c.tendencies.empty()) {
      ordered_json tendencies = ordered_json::object();
      for (const TendencyStats& t : c.tendencies) {
        tendencies[std::to_string(t.steps)] = {{"count", t.count},
                                               {"nan_count", t.nan_count},
                                               {"mean", NumberOrNullJson(t.mean)},
                                               {"std", NumberOrNullJson(t.std)},
                                               {"min", NumberOrNullJson(t.min)},
                                               {"max", NumberOrNullJson(t.max)}};
      }
      channel["tendencies"] = std::move(tendencies);
    }
    channels.push_back(std::move(channel));
  }
  ordered_json doc;
  doc["format"] = kFormat;
  doc["source"] = stats.source;
  if (stats.decode_cf) doc["decode_cf"] = *stats.decode_cf;
  doc["select"] = std::move(select);
  if (!stats.tendency_steps.empty()) doc["tendency_steps"] = stats.tendency_steps;
  if (stats.time_step_seconds) doc["time_step_seconds"] = *stats.time_step_seconds;
  doc["channels"] = std::move(channels);
  return doc.dump(2) + "\n";
}

Result<ChannelStatsFile> ParseChannelStats(std::string_view json_text) {
  // ordered_json keeps "select" in the file's order (the order the selections were given).
  ordered_json doc = ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgumentError("stats file: not a JSON object");
  }
  ZS_ASSIGN_OR_RETURN(std::string format, String(doc, "format", ""));
  if (format != kFormat) {
    return UnsupportedError("stats file: format '" + format + "' is not '" + std::string(kFormat) +
                            "'");
  }
  ChannelStatsFile file;
  ZS_ASSIGN_OR_RETURN(file.source, String(doc, "source", ""));
  if (const auto decode_cf = doc.find("decode_cf"); decode_cf != doc.end()) {
    if (!decode_cf->is_boolean()) {
      return InvalidArgumentError("stats file: decode_cf: expected true or false");
    }
    file.decode_cf = decode_cf->get<bool>();
  }
  const auto select = doc.find("select");
  if (select == doc.end() || !select->is_object()) {
    return InvalidArgumentError("stats file: select: expected an object");
  }
  for (const auto& [dim, value] : select->items()) {
    SelectedLabels labels;
    labels.dim = dim;
    const ordered_json* list = &value;
    if (value.is_object()) {
      labels.is_range = false;
      const auto values = value.find("values");
      list = values == value.end() ? nullptr : &*values;
    }
    if (list == nullptr || !list->is_array() || (labels.is_range && list->size() != 2)) {
      return InvalidArgumentError("stats file: select." + dim +
                                  ": expected [first, last] or {\"values\": [...]}");
    }
    for (const ordered_json& label : *list) {
      if (!label.is_string() && !label.is_number()) {
        return InvalidArgumentError("stats file: select." + dim +
                                    ": labels are strings or numbers");
      }
      labels.numeric = label.is_number();
      labels.labels.push_back(label.is_string() ? label.get<std::string>() : label.dump());
    }
    file.select.push_back(std::move(labels));
  }
  if (const auto steps = doc.find("tendency_steps"); steps != doc.end()) {
    if (!steps->is_array()) {
      return InvalidArgumentError("stats file: tendency_steps: expected a list of step counts");
    }
    for (const ordered_json& n : *steps) {
      if (!n.is_number_unsigned() || n.get<uint64_t>() == 0) {
        return InvalidArgumentError("stats file: tendency_steps: expected positive integers, got " +
                                    n.dump());
      }
      file.tendency_steps.push_back(n.get<uint64_t>());
    }
  }
  if (const auto step = doc.find("time_step_seconds"); step != doc.end()) {
    if (!step->is_number_integer()) {
      return InvalidArgumentError("stats file: time_step_seconds: expected an integer");
    }
    file.time_step_seconds = step->get<int64_t>();
  }
  const auto channels = doc.find("channels");
  if (channels == doc.end() || !channels->is_array()) {
    return InvalidArgumentError("stats file: channels: expected a list");
  }
  for (size_t i = 0; i < channels->size(); ++i) {
    const ordered_json& c = (*channels)[i];
    const std::string path = "channels[" + std::to_string(i) + "]";
    if (!c.is_object()) return InvalidArgumentError("stats file: " + path + ": expected an object");
    ChannelStats s;
    ZS_ASSIGN_OR_RETURN(s.name, String(c, "name", path));
    ZS_ASSIGN_OR_RETURN(s.variable, String(c, "variable", path));
    ZS_ASSIGN_OR_RETURN(double level, NumberOrNull(c, "level", path));
    if (!std::isnan(level)) s.level = level;
    ZS_ASSIGN_OR_RETURN(s.count, Count(c, "count", path));
    ZS_ASSIGN_OR_RETURN(s.nan_count, Count(c, "nan_count", path));
    ZS_ASSIGN_OR_RETURN(s.mean, NumberOrNull(c, "mean", path));
    ZS_ASSIGN_OR_RETURN(s.std, NumberOrNull(c, "std", path));
    ZS_ASSIGN_OR_RETURN(s.min, NumberOrNull(c, "min", path));
    ZS_ASSIGN_OR_RETURN(s.max, NumberOrNull(c, "max", path));
    ZS_ASSIGN_OR_RETURN(s.tendencies, ParseTendencies(c, path));
    file.channels.push_back(std::move(s));
  }
  return file;
}

}  // namespace zarrstream
