// The `--select` syntax: "time=1979-01-01:2015-12-31,level=500,850" into label selections.
#include "zarrstream/label_selection.h"

#include <cctype>
#include <charconv>

#include "dataset/cf_time.h"

namespace zarrstream {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParsesAsNumber(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// What a label can be read as: a number, a date, or (empty: an open end) anything.
struct LabelKinds {
  bool number = false;
  bool date = false;
};

LabelKinds KindsOf(std::string_view text) {
  if (text.empty()) return {true, true};
  return {ParsesAsNumber(text), ParseDateLabel(text).ok()};
}

// Splits "START:STOP" at its range separator; nullopt when the text is one label (no ':' with
// labels of one kind on both sides). Several candidate separators are an error.
Result<std::optional<size_t>> FindRangeSeparator(std::string_view text, std::string_view arg) {
  std::optional<size_t> found;
  for (size_t pos = text.find(':'); pos != std::string_view::npos; pos = text.find(':', pos + 1)) {
    const LabelKinds left = KindsOf(Trim(text.substr(0, pos)));
    const LabelKinds right = KindsOf(Trim(text.substr(pos + 1)));
    if (!((left.number && right.number) || (left.date && right.date))) continue;
    if (found) {
      std::string s = "ambiguous selection '";
      s += arg;
      s += "': more than one ':' could separate the range's ends";
      return InvalidArgumentError(std::move(s));
    }
    found = pos;
  }
  return found;
}

Status BadSelection(std::string_view piece, std::string_view why) {
  std::string s = "invalid selection '";
  s += piece;
  s += "': ";
  s += why;
  s += " (expected DIM=START:STOP or DIM=LABEL[,LABEL...], e.g. time=1979-01-01:2015-12-31)";
  return InvalidArgumentError(std::move(s));
}

// Why `text` (neither one label nor a range of two) does not parse: the first end of a range
// that is neither a number nor a date, with the date parser's reason when it looks like a date.
Status BadLabels(std::string_view piece, std::string_view text) {
  const size_t colon = text.find(':');
  std::string_view bad = text;
  if (colon != std::string_view::npos && text.find(':', colon + 1) == std::string_view::npos) {
    const std::string_view start = Trim(text.substr(0, colon));
    const LabelKinds kinds = KindsOf(start);
    bad = kinds.number || kinds.date ? Trim(text.substr(colon + 1)) : start;
  }
  if (bad.size() >= 4 && std::isdigit(static_cast<unsigned char>(bad[0])) &&
      bad.find('-') != std::string_view::npos) {
    return BadSelection(piece, ParseDateLabel(bad).status().message());
  }
  std::string why = "'";
  why += bad;
  why += "' is not a number or a date";
  return BadSelection(piece, why);
}

// Ok when `text` can be one label: a number, a date, or text for a text coordinate (a level name,
// ERA5's `expver`). What looks like a date but is not one, and text with a ':' that separates no
// range (a range with a bad end), are errors here, where the whole argument can be quoted.
Status CheckLabel(std::string_view piece, std::string_view text) {
  const LabelKinds kinds = KindsOf(text);
  if (kinds.number || kinds.date) return Status::Ok();
  const bool date_like = text.size() >= 4 && std::isdigit(static_cast<unsigned char>(text[0])) &&
                         text.find('-') != std::string_view::npos;
  if (date_like || text.find(':') != std::string_view::npos) return BadLabels(piece, text);
  return Status::Ok();
}

}  // namespace

std::string LabelSelection::ToString() const {
  std::string s = dim;
  s += "=";
  if (is_range()) {
    s += start.value_or("");
    s += ":";
    s += stop.value_or("");
    return s;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += ",";
    s += values[i];
  }
  return s;
}

Result<std::vector<LabelSelection>> ParseLabelSelections(std::span<const std::string> args) {
  std::vector<LabelSelection> selections;
  for (const std::string& arg : args) {
    bool continues = false;  // the previous piece of this argument was a list of labels
    std::string_view rest = arg;
    while (true) {
      const size_t comma = rest.find(',');
      const std::string_view piece = Trim(rest.substr(0, comma));
      const size_t eq = piece.find('=');
      if (eq == std::string_view::npos) {
        if (!continues) return BadSelection(piece, "no '='");
        if (piece.empty()) return BadSelection(arg, "an empty label");
        ZS_RETURN_IF_ERROR(CheckLabel(piece, piece));
        selections.back().values.emplace_back(piece);
      } else {
        LabelSelection selection;
        selection.dim = std::string(Trim(piece.substr(0, eq)));
        const std::string_view text = Trim(piece.substr(eq + 1));
        if (selection.dim.empty()) return BadSelection(piece, "no dimension name");
        if (text.empty()) return BadSelection(piece, "no labels");
        for (const LabelSelection& other : selections) {
          if (other.dim == selection.dim) {
            return BadSelection(piece, "dimension '" + selection.dim + "' is selected twice");
          }
        }
        ZS_ASSIGN_OR_RETURN(std::optional<size_t> separator, FindRangeSeparator(text, piece));
        if (separator) {
          const std::string_view start = Trim(text.substr(0, *separator));
          const std::string_view stop = Trim(text.substr(*separator + 1));
          if (!start.empty()) selection.start = std::string(start);
          if (!stop.empty()) selection.stop = std::string(stop);
        } else {
          ZS_RETURN_IF_ERROR(CheckLabel(piece, text));
          selection.values.emplace_back(text);
        }
        continues = !selection.is_range();
        selections.push_back(std::move(selection));
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return selections;
}

}  // namespace zarrstream
