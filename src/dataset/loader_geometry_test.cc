// The loader's geometry on a small dataset in a memory store, without a loader: which channels the
// options pick and in what order, where each output channel comes from, the batch's layout, the
// normalisation a stats file gives, and configuration errors that name what is wrong. Errors the
// loader reports at open are also checked end to end in loader_test.cc and tests/test_loader.py.
#include "dataset/loader_geometry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "array/memory_dataset_test_util.h"
#include "dataset/stats_file.h"
#include "util/status_test_util.h"

namespace zarrstream {
namespace {

using testing::MemoryDataset;

constexpr uint64_t kTimes = 4, kLat = 2, kLon = 3;

// temperature (time, level, latitude, longitude) at levels 500 and 850; t2m and the forcing tisr
// (time, latitude, longitude); a static orography (latitude, longitude).
const std::string& DatasetUrl() {
  static const std::string url = [] {
    static MemoryDataset m("loader_geometry_test");  // for the process: the registry finds it
    m.AddArray<int64_t>("time", {kTimes}, {kTimes}, {"time"}, {0, 6, 12, 18},
                        {{"units", "hours since 2000-01-01"}, {"calendar", "standard"}});
    m.AddArray<int32_t>("level", {2}, {2}, {"level"}, {500, 850});
    m.AddArray<float>("latitude", {kLat}, {kLat}, {"latitude"}, {10, -10});
    m.AddArray<float>("longitude", {kLon}, {kLon}, {"longitude"}, {0, 120, 240});
    const std::vector<uint64_t> field = {kTimes, kLat, kLon};
    const std::vector<std::string> field_dims = {"time", "latitude", "longitude"};
    m.AddArray<float>("temperature", {kTimes, 2, kLat, kLon}, {1, 2, kLat, kLon},
                      {"time", "level", "latitude", "longitude"},
                      std::vector<float>(kTimes * 2 * kLat * kLon, 1.0F));
    m.AddArray<float>("t2m", field, field, field_dims,
                      std::vector<float>(kTimes * kLat * kLon, 1.0F));
    m.AddArray<float>("tisr", field, field, field_dims,
                      std::vector<float>(kTimes * kLat * kLon, 1.0F));
    m.AddArray<float>("orography", {kLat, kLon}, {kLat, kLon}, {"latitude", "longitude"},
                      std::vector<float>(kLat * kLon, 1.0F));
    return m.url();
  }();
  return url;
}

Result<LoaderGeometry> Geometry(const LoaderOptions& options) {
  ZS_ASSIGN_OR_RETURN(Dataset dataset, Dataset::Open(DatasetUrl()));
  return MakeLoaderGeometry(dataset, options);
}

// A label list, as the fronts build it.
LabelSelection Labels(std::string dim, std::vector<std::string> values) {
  LabelSelection selection;
  selection.dim = std::move(dim);
  selection.values = std::move(values);
  return selection;
}

TEST(LoaderGeometryTest, DefaultVariablesAreTheTimedOnesWithForcingsLast) {
  LoaderOptions options;
  options.forcings = {"tisr"};
  auto g = Geometry(options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  // orography has no time step to stack: out unless named.
  EXPECT_EQ(g->input_names,
            (std::vector<std::string>{"t2m", "temperature@500", "temperature@850", "tisr"}));
  EXPECT_TRUE(g->target_names.empty());
  EXPECT_EQ(g->num_inputs, 4U);
  // The two levels of temperature share one array.
  ASSERT_EQ(g->arrays.size(), 3U);
  EXPECT_EQ(g->channel_array, (std::vector<size_t>{0, 1, 1, 2}));
  EXPECT_EQ(g->dims, (std::vector<std::string>{"time", "latitude", "longitude"}));
  EXPECT_EQ(g->mean, (std::vector<double>(4, 0.0)));
  EXPECT_EQ(g->inv_std, (std::vector<double>(4, 1.0)));
}

TEST(LoaderGeometryTest, InputsAreTimeMajorAndTargetsLeadMajor) {
  LoaderOptions options;
  options.variables = {"t2m", "temperature@850"};
  options.sample = {{"time", 2}};
  options.target_dim = "time";
  options.target_offsets = {1, 0};
  options.select = {Labels("latitude", {"-10"})};
  auto g = Geometry(options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->target_names, (std::vector<std::string>{"t2m", "temperature@850"}));
  EXPECT_EQ(g->channel_array, (std::vector<size_t>{0, 1, 0, 1}));  // targets read once
  EXPECT_EQ(g->time_dim, 0U);
  EXPECT_EQ(g->time_window, 2U);
  EXPECT_EQ(g->target_steps, (std::vector<uint64_t>{2, 1}));
  EXPECT_EQ(g->sample_dims, (std::vector<std::string>{"time"}));
  EXPECT_EQ(g->spatial_dims, (std::vector<std::string>{"latitude", "longitude"}));
  EXPECT_EQ(g->ranges[1], (IndexRange{1, 2}));
  EXPECT_EQ(g->spatial_shape, (std::vector<uint64_t>{1, kLon}));
  EXPECT_EQ(g->slab_elements, kLon);
  struct Want {
    size_t channel;
    uint64_t step;
    uint32_t out_channel;
  };
  const std::vector<Want> inputs = {{0, 0, 0}, {1, 0, 1}, {0, 1, 2}, {1, 1, 3}};
  const std::vector<Want> targets = {{2, 2, 0}, {3, 2, 1}, {2, 1, 2}, {3, 1, 3}};
  ASSERT_EQ(g->input_slabs.size(), inputs.size());
  ASSERT_EQ(g->target_slabs.size(), targets.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(g->input_slabs[i].channel, inputs[i].channel) << i;
    EXPECT_EQ(g->input_slabs[i].step, inputs[i].step) << i;
    EXPECT_EQ(g->input_slabs[i].out_channel, inputs[i].out_channel) << i;
    EXPECT_FALSE(g->input_slabs[i].target);
    EXPECT_EQ(g->target_slabs[i].channel, targets[i].channel) << i;
    EXPECT_EQ(g->target_slabs[i].step, targets[i].step) << i;
    EXPECT_EQ(g->target_slabs[i].out_channel, targets[i].out_channel) << i;
    EXPECT_TRUE(g->target_slabs[i].target);
  }
}

TEST(LoaderGeometryTest, NormalisesWithTheStatsFileAndRejectsWhatItCannotUse) {
  ChannelStatsFile stats;
  stats.source = "memory://loader_geometry_test";
  auto add = [&](std::string name, double mean, double std) {
    ChannelStats c;
    c.name = c.variable = std::move(name);
    c.count = 1;
    c.mean = mean;
    c.std = std;
    stats.channels.push_back(c);
  };
  add("t2m", 280, 4);
  add("tisr", 100, 0);  // a constant field: scaled by 1
  add("orography", NAN, NAN);
  const std::string path = ::testing::TempDir() + "loader_geometry_test_stats.json";
  std::ofstream(path) << FormatChannelStats(stats);

  LoaderOptions options;
  options.variables = {"t2m"};
  options.forcings = {"tisr"};
  options.normalize = path;
  auto g = Geometry(options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->mean, (std::vector<double>{280, 100}));
  EXPECT_EQ(g->inv_std, (std::vector<double>{0.25, 1.0}));

  options.variables = {"t2m", "temperature@500"};
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kInvalidArgument,
                      {path, "no channel 'temperature@500'", "'t2m', 'tisr', 'orography'"});
  options.variables = {"orography"};
  options.forcings = {};
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kInvalidArgument,
                      {"'orography'", "no finite mean and std"});
  options.normalize = path + ".missing";
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kNotFound,
                      {"cannot open the stats file", ".missing"});
}

TEST(LoaderGeometryTest, ConfigurationErrorsSayWhatToChange) {
  LoaderOptions options;
  options.variables = {"t2m"};
  options.select = {Labels("level", {"500"})};
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kInvalidArgument,
                      {"selection of 'level'", "chosen with the variables"});
  options.select = {};
  options.stride = {{"latitude", 1}};
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kInvalidArgument,
                      {"stride along 'latitude'", "not sampled", "window in `sample`"});
  options.stride = {};
  options.target_offsets = {1};
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kInvalidArgument,
                      {"need a target dimension"});
  options.target_dim = "latitude";
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kInvalidArgument,
                      {"target offsets along 'latitude'", "time dimension 'time'"});
  options.target_dim = "time";
  options.target_offsets = {1};
  options.variables = {"t2m", "orography"};
  options.target_variables = {"t2m", "orography"};
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kConfig,
                      {"target variable 'orography'", "no time dimension", "input only"});
  options.variables = {"orography"};
  options.target_variables = {};
  options.forcings = {"t2m"};
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kConfig,
                      {"all static fields", "none can be a target"});
}

TEST(LoaderGeometryTest, FrequencyCountsStepsOfTheStore) {
  LoaderOptions options;
  options.variables = {"t2m"};
  options.frequency = "12h";  // the store is 6-hourly
  options.target_dim = "time";
  options.target_offsets = {1};
  auto g = Geometry(options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->time_step, 2U);
  EXPECT_EQ(g->target_steps, (std::vector<uint64_t>{1}));
  options.sample = {{"time", 2}};  // 0, 12 h and the target at 24 h: past the 4 steps
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kInvalidArgument,
                      {"target offset 1", "past the 4 selected steps"});
  options.sample = {};
  options.frequency = "9h";
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kConfig,
                      {"frequency '9h' (32400 s)", "not a whole number", "(21600 s)"});
  options.frequency = "1d";
  options.target_offsets = {};
  options.target_dim = {};
  auto daily = Geometry(options);
  ASSERT_TRUE(daily.ok()) << daily.status().ToString();
  EXPECT_EQ(daily->time_step, 4U);
  options.sample = {{"time", 2}};
  ExpectErrorContains(Geometry(options).status(), ErrorCode::kInvalidArgument,
                      {"sample window 2 along 'time' (steps of 1d: 5 of the store)", "4 selected"});
}

TEST(LoaderGeometryTest, StaticFieldsAreKeptInputsAtEveryStep) {
  LoaderOptions options;
  options.variables = {"orography", "t2m"};
  options.sample = {{"time", 2}, {"longitude", 2}};
  options.target_dim = "time";
  options.target_offsets = {1};
  options.select = {Labels("latitude", {"-10"})};
  auto g = Geometry(options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->input_names, (std::vector<std::string>{"orography", "t2m"}));
  EXPECT_EQ(g->target_names, (std::vector<std::string>{"t2m"}));  // targets leave it out
  EXPECT_EQ(g->dims, (std::vector<std::string>{"time", "latitude", "longitude"}));
  EXPECT_TRUE(g->channels[0].broadcast);
  ASSERT_EQ(g->resident.size(), 2U);
  ASSERT_TRUE(g->resident[0].has_value());
  EXPECT_FALSE(g->resident[1].has_value());
  // The selected latitude, every longitude (patches are cut from it).
  EXPECT_EQ(g->resident[0]->start, (std::vector<uint64_t>{1, 0}));
  EXPECT_EQ(g->resident[0]->shape, (std::vector<uint64_t>{1, kLon}));
  EXPECT_EQ(ArrayDimOf(*g, 0, 0), std::nullopt);
  EXPECT_EQ(ArrayDimOf(*g, 0, 2), std::optional<size_t>(1));
  EXPECT_EQ(ArrayDimOf(*g, 1, 2), std::optional<size_t>(2));
  // Both steps of the window carry it.
  ASSERT_EQ(g->input_slabs.size(), 4U);
  EXPECT_EQ(g->input_slabs[2].channel, 0U);
  EXPECT_EQ(g->input_slabs[2].step, 1U);
  EXPECT_EQ(g->input_slabs[2].out_channel, 2U);
}

constexpr uint64_t kMembers = 3;

// An ensemble: t2m (time, number, latitude, longitude), temperature (time, number, level,
// latitude, longitude), members labelled 1 to 3, and a static orography without members.
const std::string& EnsembleUrl() {
  static const std::string url = [] {
    static MemoryDataset m("loader_geometry_ensemble_test");
    m.AddArray<int64_t>("time", {kTimes}, {kTimes}, {"time"}, {0, 6, 12, 18},
                        {{"units", "hours since 2000-01-01"}, {"calendar", "standard"}});
    m.AddArray<int64_t>("number", {kMembers}, {kMembers}, {"number"}, {1, 2, 3});
    m.AddArray<int32_t>("level", {2}, {2}, {"level"}, {500, 850});
    m.AddArray<float>("latitude", {kLat}, {kLat}, {"latitude"}, {10, -10});
    m.AddArray<float>("longitude", {kLon}, {kLon}, {"longitude"}, {0, 120, 240});
    m.AddArray<float>("t2m", {kTimes, kMembers, kLat, kLon}, {1, 2, kLat, kLon},
                      {"time", "number", "latitude", "longitude"},
                      std::vector<float>(kTimes * kMembers * kLat * kLon, 1.0F));
    m.AddArray<float>("temperature", {kTimes, kMembers, 2, kLat, kLon}, {1, 2, 1, kLat, kLon},
                      {"time", "number", "level", "latitude", "longitude"},
                      std::vector<float>(kTimes * kMembers * 2 * kLat * kLon, 1.0F));
    m.AddArray<float>("orography", {kLat, kLon}, {kLat, kLon}, {"latitude", "longitude"},
                      std::vector<float>(kLat * kLon, 1.0F));
    return m.url();
  }();
  return url;
}

Result<LoaderGeometry> EnsembleGeometry(const LoaderOptions& options) {
  ZS_ASSIGN_OR_RETURN(Dataset dataset, Dataset::Open(EnsembleUrl()));
  return MakeLoaderGeometry(dataset, options);
}

TEST(LoaderGeometryTest, EachMemberIsASample) {
  LoaderOptions options;
  options.variables = {"t2m", "temperature@850"};
  options.forcings = {"orography"};
  options.ensemble = EnsembleMode::kSample;
  options.target_dim = "time";
  options.target_offsets = {1};
  auto g = EnsembleGeometry(options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->dims, (std::vector<std::string>{"time", "number", "latitude", "longitude"}));
  EXPECT_EQ(g->member_dim, std::optional<size_t>(1));
  EXPECT_EQ(g->sample_dims, (std::vector<std::string>{"time", "number"}));
  EXPECT_EQ(g->window[1], 1U);
  EXPECT_EQ(g->spatial_dims, (std::vector<std::string>{"latitude", "longitude"}));
  EXPECT_EQ(g->input_names, (std::vector<std::string>{"t2m", "temperature@850", "orography"}));
  // temperature@850: the level dimension (2) is skipped; the orography lacks time and members.
  EXPECT_EQ(ArrayDimOf(*g, 1, 1), std::optional<size_t>(1));
  EXPECT_EQ(ArrayDimOf(*g, 1, 2), std::optional<size_t>(3));
  EXPECT_TRUE(g->channels[2].broadcast && g->channels[2].without_member);
  EXPECT_EQ(ArrayDimOf(*g, 2, 1), std::nullopt);
  EXPECT_EQ(ArrayDimOf(*g, 2, 2), std::optional<size_t>(0));
  EXPECT_EQ(ArrayDimOf(*g, 2, 3), std::optional<size_t>(1));

  options.sample = {{"number", 2}};
  ExpectErrorContains(EnsembleGeometry(options).status(), ErrorCode::kConfig,
                      {"each member is a sample"});
}

TEST(LoaderGeometryTest, MembersStackIntoChannelsLikeLevels) {
  LoaderOptions options;
  options.variables = {"t2m", "temperature@500,850"};
  options.forcings = {"orography"};
  options.ensemble = EnsembleMode::kChannels;
  auto g = EnsembleGeometry(options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->dims, (std::vector<std::string>{"time", "latitude", "longitude"}));
  EXPECT_EQ(g->member_dim, std::nullopt);
  EXPECT_EQ(g->input_names,
            (std::vector<std::string>{"t2m#1", "t2m#2", "t2m#3", "temperature@500#1",
                                      "temperature@500#2", "temperature@500#3", "temperature@850#1",
                                      "temperature@850#2", "temperature@850#3", "orography"}));
  // temperature@850#2: members along array dimension 1, level along 2.
  const Channel& c = g->channels[7];
  EXPECT_EQ(c.member_dim, std::optional<size_t>(1));
  EXPECT_EQ(c.member_index, 1U);
  EXPECT_EQ(c.level_index, 1U);
  EXPECT_EQ(ArrayDimOf(*g, 7, 0), std::optional<size_t>(0));
  EXPECT_EQ(ArrayDimOf(*g, 7, 1), std::optional<size_t>(3));
  EXPECT_EQ(ArrayDimOf(*g, 7, 2), std::optional<size_t>(4));
  EXPECT_EQ(ArrayDimOf(*g, 9, 1), std::optional<size_t>(0));  // the orography, once

  // Without an ensemble mode the members are a dimension every channel must have.
  options.ensemble = EnsembleMode::kNone;
  EXPECT_FALSE(EnsembleGeometry(options).ok());
  options.forcings.clear();
  auto whole = EnsembleGeometry(options);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->spatial_dims, (std::vector<std::string>{"number", "latitude", "longitude"}));
}

}  // namespace
}  // namespace zarrstream
