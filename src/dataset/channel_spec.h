// The dataset/channel model shared by the loader, `zarrstream stats` and `rechunk --stack`: which
// arrays of a dataset are variables, and how "temperature@500,850" becomes an ordered list of
// channels, each one 2-D/3-D slice of one array.
//
// A dataset is a Zarr group whose arrays share named dimensions (v3 dimension_names, v2
// _ARRAY_DIMENSIONS), with 1-D coordinate arrays named after dimensions; or a single array. Its
// data variables are the arrays that are not coordinates: not named after a dimension of any array,
// and not listed in any array's "coordinates" attribute (xarray's encoding of other coordinates).
//
// A variable's dimensions are classified by name:
//   level dimension   "level", "pressure_level", "isobaricInhPa", "plev" (at most one per
//   variable);
//                     each index along it is one channel, named by the level coordinate's label;
//   channel dimension "channel", on an array whose attribute "channel_names" names each index
//                     (a stacked (time, channel, lat, lon) array, as `rechunk --stack` writes);
//   time dimension    "time", "valid_time", "init_time", "forecast_reference_time";
//   member dimension  "number", "member", "ensemble", "realization" (CF): an ensemble's members;
//                     a dimension of its variables like the shared ones, which the loader may
//                     sample or stack into channels (LoaderOptions::ensemble);
//   shared dimensions the other dimensions present in every data variable that has any (e.g.
//                     latitude, longitude).
// Any other dimension is an error: it is neither a level nor shared, so a channel would not be one
// field. Every resolved channel must have the same dimensions (names and sizes) once its level or
// channel dimension is removed, so channels stack into [channel, ...] batches; except that among
// channels with a time dimension, one without it whose other dimensions match is a static field
// (orography, land-sea mask): the same at every time step (Channel::broadcast).
//
// Channel names (the loader, the stats file and `rechunk --stack` agree on them): a variable
// without a level dimension is its name ("2m_temperature"); a level of a variable is
// "<name>@<level label>", the label printed as an integer when integral ("temperature@500"),
// otherwise as the shortest text that reads back to the same value ("temperature@0.5"); a stacked
// array's channels are its channel_names.
//
// Dataset and Channel hold open array handles: cheap to copy, usable from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dataset/coordinates.h"
#include "zarrstream/array.h"
#include "zarrstream/status.h"

namespace zarrstream {

// One variable as the user asks for it: "2m_temperature", "temperature@500,850", "temperature@*".
struct VariableSpec {
  enum class Levels : uint8_t {
    kUnspecified,  // "temperature": every level of a variable that has levels
    kAll,          // "temperature@*"
    kList,         // "temperature@500,850"
  };
  std::string variable;
  Levels levels = Levels::kUnspecified;
  std::vector<std::string> level_labels;  // kList: as written

  std::string ToString() const;
};

// Parses specs from command-line arguments: in each argument commas separate specs, and a number
// after a level list is one more level of it ("t2m,temperature@500,850,u@*" is three specs).
// Level labels must be numbers.
Result<std::vector<VariableSpec>> ParseVariableSpecs(std::span<const std::string> args);

bool IsLevelDimension(std::string_view dim);
bool IsTimeDimension(std::string_view dim);
bool IsMemberDimension(std::string_view dim);

// A run of a combined dataset's time dimension stored in one array (Dataset::Join, Concat):
// dataset indices [begin, end) are indices [first, first + end - begin) of `array`.
struct TimeSegment {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t first = 0;
  Array array;
};

// One channel: one index along the level (or channel) dimension of one array, or a whole array.
struct Channel {
  Channel(std::string in_array_name, Array in_array)
      : array_name(std::move(in_array_name)), array(std::move(in_array)) {}

  std::string name;        // see the overview
  std::string variable;    // the variable: the array's name; for a stacked array, the channel name
                           // up to its '@'
  std::string array_name;  // the array of the dataset holding this channel
  Array array;
  // The dimension of `array` this channel is one index of: the level dimension, or a stacked
  // array's channel dimension. nullopt when the channel is the whole array.
  std::optional<size_t> level_dim;
  uint64_t level_index = 0;  // the index along `level_dim`
  // Members stacked into channels (LoaderOptions::ensemble kChannels): the dimension of `array`
  // holding the ensemble's members, removed from `dims` like `level_dim`, and this channel's
  // member along it. nullopt: the channel has no member dimension or keeps it in `dims`.
  std::optional<size_t> member_dim;
  uint64_t member_index = 0;
  // The level's label as a number: the level coordinate's value; for a stacked channel the number
  // after '@' in its name, when there is one.
  std::optional<double> level;
  // The array's dimension names and shape without `level_dim`: the same for every channel of one
  // resolution.
  std::vector<std::string> dims;
  std::vector<uint64_t> shape;
  // A static field among time-dependent channels: its dims are theirs without the time
  // dimension, and its one field stands for every time step.
  bool broadcast = false;
  // A channel without the ensemble's member dimension among channels that have it (resolved with
  // a member dimension): its one field stands for every member.
  bool without_member = false;
  // A time-dependent channel of a combined dataset: where each run of the dataset's time
  // dimension is stored, in order, covering it whole (`shape` holds the dataset's time extent;
  // `array` is the first segment's, and every segment's array has its data type and CF
  // attributes). Empty: `array` holds the dataset's indices as they are.
  std::vector<TimeSegment> time_segments;
};

// How a join treats the time axes of its stores: kExact asks them to be equal, kInner takes the
// times every store holds (one run of each store's axis).
enum class JoinDates : uint8_t { kExact, kInner };

bool HasTimeDimension(const std::vector<std::string>& dims);

// The attribute `zarrstream rechunk` gives its destination (the group, or the array it writes
// alone) while the job runs, with the value kUnfinishedRechunkValue, and removes when the last
// part finishes. Dataset::Open refuses a store that carries it: the chunks not yet written would
// read as fill values.
inline constexpr std::string_view kUnfinishedRechunkAttribute = "zarrstream_rechunk";
inline constexpr std::string_view kUnfinishedRechunkValue = "unfinished";
// Whether a group's or array's attributes carry that marker.
bool IsUnfinishedRechunk(const nlohmann::json& attributes);

class Dataset {
 public:
  // Opens the group or single array at `url`, or a combination of stores described in JSON
  // (text starting with '[' or '{'; OpenDatasetForm). A group or array that an unfinished
  // `zarrstream rechunk` is writing (kUnfinishedRechunkAttribute) is an error.
  static Result<Dataset> Open(std::string_view url, const OpenOptions& options = {});
  // Several datasets as one (docs/loader.md, "Several stores"). Join: each variable is the first
  // member's that holds it; the dimensions the members share must have the same coordinates
  // (with kInner, the time dimension is cut to the times all hold), else a kConfig error naming
  // the dimension, the two stores and the first index where they differ. Concat: the members
  // follow each other along time dimension `dim`, each one step of its time axis after the one
  // before (a gap or an overlap is a kConfig error naming both stores and the labels), with the
  // first member's variables and equal other dimensions.
  static Result<Dataset> Join(std::vector<Dataset> members, JoinDates dates);
  static Result<Dataset> Concat(std::vector<Dataset> members, std::string_view dim);
  static Result<Dataset> FromGroup(const Group& group);
  // A dataset of one array; `name` is its variable name (for a stacked array, only used in
  // messages).
  static Result<Dataset> FromArray(const Array& array, std::string name);

  // The store's URL; a combination's form: "join(a.zarr, b.zarr)", "concat(...)".
  const std::string& url() const { return url_; }
  // The group, or nullopt for a single-array dataset (which has no coordinates) or a
  // combination of stores.
  const std::optional<Group>& group() const { return group_; }
  bool is_single_array() const { return single_.has_value(); }
  bool is_combined() const { return !members_.empty(); }
  // The data variables, sorted.
  const std::vector<std::string>& variable_names() const { return variables_; }
  // Which data each store held as it opened (StoreIdentity): one entry per store, in the order
  // the dataset names them (a combination's members depth first), each with the URL it was given.
  const std::vector<StoreIdentity>& store_identities() const { return identities_; }
  // The names of the arrays' dimensions, in the order first met.
  std::vector<std::string> dimension_names() const;
  // The variables a loader or `zarrstream stats` takes when none are named: those with a time
  // dimension, sorted; every variable where none has one. Static fields join only when named.
  std::vector<std::string> DefaultVariableNames() const;
  // Arrays of the group that are not data variables because they cannot be channels, with why:
  // a member that could not be opened (an unknown data type: its open error) or one of a CPU-only
  // type (strings, datetime64) that is no coordinate. Naming one as a channel is that error.
  const std::map<std::string, Status>& unusable() const { return unusable_; }
  Result<Array> OpenVariable(std::string_view name) const;
  // The coordinate of `dim` (see Coordinate::Load); an error for a single-array dataset.
  Result<Coordinate> LoadCoordinate(std::string_view dim) const;

  // The channels `specs` name, in order (an empty list: DefaultVariableNames). Static fields
  // among time-dependent channels are marked `broadcast`. Errors name the dataset and list what
  // is available: an unknown variable, a level the level coordinate lacks, levels asked of a
  // variable without a level dimension, a dimension that is neither level nor shared, channels
  // whose dimensions differ, a channel named twice. With `member_dim` (an ensemble's member
  // dimension), a channel without it among channels that have it is marked `without_member`
  // instead of being an error.
  Result<std::vector<Channel>> ResolveChannels(std::span<const VariableSpec> specs,
                                               std::string_view member_dim = {}) const;

 private:
  // Open's dataset of the single array at `url`.
  static Result<Dataset> OpenArrayDataset(std::string_view url, const OpenOptions& options);
  Result<std::vector<Channel>> ResolveOne(const VariableSpec& spec) const;
  // A combination's ResolveOne: in the member that holds the variable (join), or in every member
  // one after the other (concat), with the members' time indices mapped onto the dataset's.
  Result<std::vector<Channel>> ResolveInMembers(const VariableSpec& spec) const;
  Result<std::vector<Channel>> ResolveInConcat(const VariableSpec& spec) const;
  // `channel` of member `k` with its time dimension as this dataset's (TimeSegment).
  Channel MapTime(Channel channel, size_t k) const;
  // A combination's checks of its members' shared dimensions (equal, or with `inner_time` the
  // time dimension cut to the times all hold) and its time axis; `concat_dim` is the dimension a
  // concatenation runs along.
  Status CombineAxes(bool inner_time, std::string_view concat_dim);
  Result<std::vector<Channel>> StackedChannels(const std::string& array_name,
                                               const Array& array) const;
  std::string Describe() const;

  std::string url_;
  std::vector<StoreIdentity> identities_;
  std::optional<Group> group_;
  std::optional<Array> single_;
  std::vector<std::string> variables_;
  std::vector<std::string> timed_variables_;  // the variables with a time dimension
  std::map<std::string, Status> unusable_;
  // Dimensions every data variable with any non-level, non-time dimension has.
  std::vector<std::string> shared_dims_;
  // Every dimension of the arrays, with its extent (the first array's that has it).
  std::vector<std::pair<std::string, uint64_t>> dims_;

  // A combination of stores: join or concat of `members_`. The time dimension `time_dim_` (empty
  // when no member has one) has coordinate `time_coordinate_`; member k's time indices
  // member_times_[k] are the dataset's from member_begin_[k] on.
  enum class Combination : uint8_t { kNone, kJoin, kConcat };
  Combination combination_ = Combination::kNone;
  std::vector<Dataset> members_;
  std::string time_dim_;
  std::optional<Coordinate> time_coordinate_;
  std::vector<IndexRange> member_times_;
  std::vector<uint64_t> member_begin_;
};

// The combination a JSON dataset form describes, its members opened with `options`: a string is a
// store's URL ({"url": ..., "ref": ...} one whose Icechunk ref is its own), a list joins its
// members ({"join": [...], "mode": "inner"} joins on the times all hold), {"concat": [...], "dim":
// "time"} concatenates them along time; forms nest. Anything else is a kConfig error quoting the
// form.
Result<Dataset> OpenDatasetForm(std::string_view json, const OpenOptions& options = {});
// The dataset text the command line's URLs (each a store's URL or a JSON form) make: the one URL
// as it is, or the JSON form that joins them, on the times all hold with kInner.
std::string JoinedDatasetText(const std::vector<std::string>& urls, JoinDates dates);

}  // namespace zarrstream
