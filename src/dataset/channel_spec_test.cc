// Variable specs and channel resolution on small datasets in a memory store. tests/test_stats.py
// resolves channels of zarr-python-written datasets through the CLI.
#include "dataset/channel_spec.h"

#include <gtest/gtest.h>

#include "array/memory_dataset_test_util.h"
#include "util/status_test_util.h"

namespace zarrstream {
namespace {

using testing::MemoryDataset;

std::vector<VariableSpec> Specs(std::vector<std::string> args) {
  auto specs = ParseVariableSpecs(args);
  EXPECT_TRUE(specs.ok()) << specs.status().ToString();
  return specs.ok() ? *specs : std::vector<VariableSpec>{};
}

std::vector<std::string> Names(const std::vector<Channel>& channels) {
  std::vector<std::string> names;
  for (const Channel& c : channels) names.push_back(c.name);
  return names;
}

// An ERA5-like group: time(2), level(3: 500, 850, 1000; chunked by 2), latitude(3, descending),
// longitude(4); t2m(time, lat, lon), temperature(time, level, lat, lon), lsm(lat, lon),
// spread(time, member, lat, lon), and lat2d listed as a coordinate in t2m's "coordinates".
Dataset OpenEra5Like() {
  static MemoryDataset* d = [] {
    auto* m = new MemoryDataset("channel_spec_test");
    m->AddArray<int64_t>("time", {2}, {2}, {"time"}, {0, 6},
                         {{"units", "hours since 2000-01-01"}, {"calendar", "standard"}});
    m->AddArray<int32_t>("level", {3}, {3}, {"level"}, {500, 850, 1000});
    m->AddArray<float>("latitude", {3}, {3}, {"latitude"}, {10, 0, -10});
    m->AddArray<float>("longitude", {4}, {4}, {"longitude"}, {0, 90, 180, 270});
    m->AddArray<float>("t2m", {2, 3, 4}, {1, 3, 4}, {"time", "latitude", "longitude"},
                       std::vector<float>(24, 1.0f), {{"coordinates", "lat2d"}});
    m->AddArray<float>("lat2d", {3, 4}, {3, 4}, {"latitude", "longitude"},
                       std::vector<float>(12, 0.0f));
    m->AddArray<float>("temperature", {2, 3, 3, 4}, {1, 2, 3, 4},
                       {"time", "level", "latitude", "longitude"}, std::vector<float>(72, 2.0f));
    m->AddArray<float>("lsm", {3, 4}, {3, 4}, {"latitude", "longitude"},
                       std::vector<float>(12, 1.0f));
    m->AddArray<float>("spread", {2, 5, 3, 4}, {1, 5, 3, 4},
                       {"time", "member", "latitude", "longitude"}, std::vector<float>(120, 0.f));
    return m;
  }();
  auto dataset = Dataset::Open(d->url());
  EXPECT_TRUE(dataset.ok()) << dataset.status().ToString();
  return *dataset;
}

TEST(VariableSpecTest, ParsesNamesLevelsAndWildcards) {
  auto specs = Specs({"2m_temperature,temperature@500,850, u@*", "z@0.5"});
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].variable, "2m_temperature");
  EXPECT_EQ(specs[0].levels, VariableSpec::Levels::kUnspecified);
  EXPECT_EQ(specs[1].variable, "temperature");
  EXPECT_EQ(specs[1].levels, VariableSpec::Levels::kList);
  EXPECT_EQ(specs[1].level_labels, (std::vector<std::string>{"500", "850"}));
  EXPECT_EQ(specs[2].variable, "u");
  EXPECT_EQ(specs[2].levels, VariableSpec::Levels::kAll);
  EXPECT_EQ(specs[3].level_labels, (std::vector<std::string>{"0.5"}));
  EXPECT_EQ(specs[1].ToString(), "temperature@500,850");
  EXPECT_EQ(specs[2].ToString(), "u@*");
  for (const char* bad : {"@500", "t@", "t@abc", "t@500,", ""}) {
    auto parsed = ParseVariableSpecs(std::vector<std::string>{bad});
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(DatasetTest, DataVariablesAreTheNonCoordinateArrays) {
  Dataset dataset = OpenEra5Like();
  EXPECT_EQ(dataset.variable_names(),
            (std::vector<std::string>{"lsm", "spread", "t2m", "temperature"}));
  EXPECT_TRUE(dataset.group().has_value());
}

TEST(DatasetTest, ResolvesVariablesAndLevelsInOrder) {
  Dataset dataset = OpenEra5Like();
  auto channels = dataset.ResolveChannels(Specs({"t2m,temperature@850,500"}));
  ASSERT_TRUE(channels.ok()) << channels.status().ToString();
  EXPECT_EQ(Names(*channels),
            (std::vector<std::string>{"t2m", "temperature@850", "temperature@500"}));
  const Channel& t2m = (*channels)[0];
  EXPECT_EQ(t2m.variable, "t2m");
  EXPECT_EQ(t2m.array_name, "t2m");
  EXPECT_FALSE(t2m.level_dim.has_value());
  EXPECT_FALSE(t2m.level.has_value());
  EXPECT_EQ(t2m.dims, (std::vector<std::string>{"time", "latitude", "longitude"}));
  EXPECT_EQ(t2m.shape, (std::vector<uint64_t>{2, 3, 4}));
  const Channel& t850 = (*channels)[1];
  EXPECT_EQ(t850.variable, "temperature");
  EXPECT_EQ(t850.array_name, "temperature");
  EXPECT_EQ(t850.level_dim, 1u);
  EXPECT_EQ(t850.level_index, 1u);
  EXPECT_EQ(t850.level, 850.0);
  EXPECT_EQ(t850.dims, t2m.dims);
  EXPECT_EQ(t850.shape, t2m.shape);
  EXPECT_EQ(t850.array.shape(), (std::vector<uint64_t>{2, 3, 3, 4}));
  EXPECT_EQ((*channels)[2].level_index, 0u);

  auto all_levels = dataset.ResolveChannels(Specs({"temperature@*"}));
  ASSERT_TRUE(all_levels.ok());
  EXPECT_EQ(Names(*all_levels),
            (std::vector<std::string>{"temperature@500", "temperature@850", "temperature@1000"}));
  auto bare = dataset.ResolveChannels(Specs({"temperature"}));
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(Names(*bare), Names(*all_levels));
}

TEST(DatasetTest, ResolutionErrorsSayWhatIsAvailable) {
  Dataset dataset = OpenEra5Like();
  ExpectErrorContains(dataset.ResolveChannels(Specs({"t3m"})).status(), ErrorCode::kNotFound,
                      {"'t3m'", "memory://channel_spec_test", "lsm, spread, t2m, temperature"});
  ExpectErrorContains(dataset.ResolveChannels(Specs({"temperature@700"})).status(),
                      ErrorCode::kNotFound, {"'700'", "coordinate 'level'", "500, 850"});
  ExpectErrorContains(dataset.ResolveChannels(Specs({"t2m@500"})).status(),
                      ErrorCode::kInvalidArgument, {"'t2m'", "no level dimension"});
  // A member dimension need not be shared, but the channels stack only with the member
  // dimension named (the loader's ensemble modes): then t2m is one field for every member.
  ExpectErrorContains(dataset.ResolveChannels(Specs({"spread", "t2m"})).status(),
                      ErrorCode::kInvalidArgument,
                      {"'spread'", "'t2m'", "different dimensions", "member=5"});
  auto members = dataset.ResolveChannels(Specs({"t2m", "spread"}), "member");
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  EXPECT_TRUE((*members)[0].without_member);
  EXPECT_FALSE((*members)[0].broadcast);
  EXPECT_FALSE((*members)[1].without_member);
  ExpectErrorContains(dataset.ResolveChannels(Specs({"temperature@500", "temperature@*"})).status(),
                      ErrorCode::kInvalidArgument, {"'temperature@500'", "twice"});
}

TEST(DatasetTest, StaticFieldsBroadcastAmongTimeDependentChannels) {
  Dataset dataset = OpenEra5Like();
  EXPECT_EQ(dataset.DefaultVariableNames(),
            (std::vector<std::string>{"spread", "t2m", "temperature"}));
  auto channels = dataset.ResolveChannels(Specs({"lsm,t2m,temperature@500"}));
  ASSERT_TRUE(channels.ok()) << channels.status().ToString();
  ASSERT_EQ(Names(*channels), (std::vector<std::string>{"lsm", "t2m", "temperature@500"}));
  EXPECT_TRUE((*channels)[0].broadcast);
  EXPECT_FALSE((*channels)[1].broadcast);
  EXPECT_FALSE((*channels)[2].broadcast);
  EXPECT_EQ((*channels)[0].dims, (std::vector<std::string>{"latitude", "longitude"}));
  // Alone, a static field is an ordinary channel.
  auto alone = dataset.ResolveChannels(Specs({"lsm"}));
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_FALSE(alone->front().broadcast);
}

TEST(DatasetTest, StaticFieldOfAnotherGridIsAnError) {
  static MemoryDataset* d = [] {
    auto* m = new MemoryDataset("channel_spec_test_static_grid");
    m->AddArray<float>("t2m", {2, 3, 4}, {1, 3, 4}, {"time", "latitude", "longitude"},
                       std::vector<float>(24, 1.0f));
    m->AddArray<float>("lsm", {2, 4}, {2, 4}, {"latitude", "longitude"},
                       std::vector<float>(8, 1.0f));
    return m;
  }();
  auto dataset = Dataset::Open(d->url());
  ASSERT_TRUE(dataset.ok()) << dataset.status().ToString();
  ExpectErrorContains(dataset->ResolveChannels(Specs({"t2m,lsm"})).status(),
                      ErrorCode::kInvalidArgument,
                      {"different dimensions", "'t2m' has (time=2, latitude=3, longitude=4)",
                       "'lsm' has (latitude=2, longitude=4)", "static field"});
}

TEST(DatasetTest, StackedArraysAreDatasetsOfNamedChannels) {
  static MemoryDataset* d = [] {
    auto* m = new MemoryDataset("channel_spec_test_stacked");
    m->AddArray<float>("stacked", {2, 3, 3, 4}, {1, 3, 3, 4},
                       {"time", "channel", "latitude", "longitude"}, std::vector<float>(72, 0.f),
                       {{"channel_names", {"t2m", "temperature@500", "temperature@850"}}});
    m->AddArray<float>("unnamed", {2, 2}, {2, 2}, {"time", "channel"}, std::vector<float>(4, 0.f));
    return m;
  }();
  auto group = Group::Open(d->url());
  ASSERT_TRUE(group.ok());
  auto array = group->OpenArray("stacked");
  ASSERT_TRUE(array.ok());
  auto single = Dataset::FromArray(*array, "stacked");
  ASSERT_TRUE(single.ok());
  EXPECT_FALSE(single->group().has_value());
  auto all = single->ResolveChannels({});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(Names(*all), (std::vector<std::string>{"t2m", "temperature@500", "temperature@850"}));
  EXPECT_EQ((*all)[2].variable, "temperature");
  EXPECT_EQ((*all)[2].level, 850.0);
  EXPECT_EQ((*all)[2].level_dim, 1u);
  EXPECT_EQ((*all)[2].level_index, 2u);
  EXPECT_FALSE((*all)[0].level.has_value());
  EXPECT_EQ((*all)[0].dims, (std::vector<std::string>{"time", "latitude", "longitude"}));

  auto picked = single->ResolveChannels(Specs({"temperature@850", "t2m"}));
  ASSERT_TRUE(picked.ok()) << picked.status().ToString();
  EXPECT_EQ(Names(*picked), (std::vector<std::string>{"temperature@850", "t2m"}));
  auto by_variable = single->ResolveChannels(Specs({"temperature"}));
  ASSERT_TRUE(by_variable.ok());
  EXPECT_EQ(by_variable->size(), 2u);
  ExpectErrorContains(single->ResolveChannels(Specs({"temperature@700"})).status(),
                      ErrorCode::kNotFound,
                      {"temperature@700", "temperature@500, temperature@850"});
  ExpectErrorContains(single->LoadCoordinate("time").status(), ErrorCode::kInvalidArgument,
                      {"single array"});

  auto in_group = Dataset::FromGroup(*group);
  ASSERT_TRUE(in_group.ok());
  ExpectErrorContains(in_group->ResolveChannels(Specs({"unnamed"})).status(),
                      ErrorCode::kInvalidArgument, {"'unnamed'", "channel_names"});
}

}  // namespace
}  // namespace zarrstream
