// Joins and concatenations of small datasets in a memory store: where each channel's time runs
// come from, and the errors for stores that do not fit together. tests/test_combined_datasets.py
// checks the loader's batches over stores xarray wrote.
#include <gtest/gtest.h>

#include "array/memory_dataset_test_util.h"
#include "dataset/channel_spec.h"
#include "dataset/loader_geometry.h"
#include "util/status_test_util.h"

namespace zarrstream {
namespace {

using testing::MemoryDataset;

// A group named `name`: `hours` 6-hourly steps from hour `first` (hours since 2000-01-01),
// latitude (2) and longitude (3) labels `lat0` + index; variables `names` (time, lat, lon).
std::string Store(const std::string& name, int64_t first, size_t hours,
                  const std::vector<std::string>& names, float lat0 = 0) {
  auto* m = new MemoryDataset("combined_dataset_test_" + name);
  std::vector<int64_t> time;
  for (size_t i = 0; i < hours; ++i) time.push_back(first + 6 * static_cast<int64_t>(i));
  m->AddArray<int64_t>("time", {hours}, {hours}, {"time"}, time,
                       {{"units", "hours since 2000-01-01"}, {"calendar", "standard"}});
  m->AddArray<float>("latitude", {2}, {2}, {"latitude"}, {lat0, lat0 + 1});
  m->AddArray<float>("longitude", {3}, {3}, {"longitude"}, {0, 1, 2});
  for (const std::string& variable : names) {
    m->AddArray<float>(variable, {hours, 2, 3}, {2, 2, 3}, {"time", "latitude", "longitude"},
                       std::vector<float>(hours * 6, 1.0f));
  }
  m->AddArray<float>("lsm", {2, 3}, {2, 3}, {"latitude", "longitude"}, std::vector<float>(6, 1.0f));
  return m->url();
}

Dataset Open(const std::string& text) {
  Result<Dataset> dataset = Dataset::Open(text);
  EXPECT_TRUE(dataset.ok()) << dataset.status().ToString();
  return *dataset;
}

std::vector<Channel> Resolve(const Dataset& dataset, std::vector<std::string> args) {
  auto specs = ParseVariableSpecs(args);
  EXPECT_TRUE(specs.ok());
  auto channels = dataset.ResolveChannels(*specs);
  EXPECT_TRUE(channels.ok()) << channels.status().ToString();
  return channels.ok() ? *channels : std::vector<Channel>{};
}

TEST(CombinedDatasetTest, JoinTakesEachVariableFromTheFirstStoreHoldingIt) {
  const std::string a = Store("join_a", 0, 4, {"t2m", "msl"});
  const std::string b = Store("join_b", 0, 4, {"t2m", "z"});
  const Dataset joined = Open(JoinedDatasetText({a, b}, JoinDates::kExact));
  EXPECT_EQ(joined.url(), "join(" + a + ", " + b + ")");
  EXPECT_EQ(joined.variable_names(), (std::vector<std::string>{"lsm", "msl", "t2m", "z"}));
  const std::vector<Channel> channels = Resolve(joined, {"t2m", "z", "lsm"});
  ASSERT_EQ(channels.size(), 3u);
  EXPECT_EQ(channels[0].array.url(), a + "/t2m");
  EXPECT_EQ(channels[1].array.url(), b + "/z");
  EXPECT_TRUE(channels[2].broadcast);
  EXPECT_TRUE(channels[0].time_segments.empty());  // equal time axes: indices as they are
}

TEST(CombinedDatasetTest, InnerJoinMapsEachStoresRunOfCommonTimes) {
  const std::string a = Store("inner_a", 0, 6, {"t2m"});  // hours 0..30
  const std::string b = Store("inner_b", 12, 6, {"z"});   // hours 12..42
  ExpectErrorContains(Dataset::Open(JoinedDatasetText({a, b}, JoinDates::kExact)).status(),
                      ErrorCode::kConfig, {"dimension 'time' differs at index 0"});
  const Dataset joined = Open(JoinedDatasetText({a, b}, JoinDates::kInner));
  Result<Coordinate> time = joined.LoadCoordinate("time");
  ASSERT_TRUE(time.ok());
  EXPECT_EQ(time->size(), 4u);
  EXPECT_EQ(time->FormatLabel(0), "2000-01-01T12:00:00");
  const std::vector<Channel> channels = Resolve(joined, {"t2m", "z"});
  ASSERT_EQ(channels[0].time_segments.size(), 1u);
  EXPECT_EQ(channels[0].shape[0], 4u);
  EXPECT_EQ(channels[0].time_segments[0].first, 2u);  // t2m's hour 12
  EXPECT_EQ(channels[1].time_segments[0].first, 0u);
}

TEST(CombinedDatasetTest, ConcatChainsTheStoresTimeRuns) {
  const std::string a = Store("concat_a", 0, 3, {"t2m"});
  const std::string b = Store("concat_b", 18, 5, {"t2m"});
  const Dataset concat = Open(R"({"concat": [")" + a + R"(", ")" + b + R"("], "dim": "time"})");
  Result<Coordinate> time = concat.LoadCoordinate("time");
  ASSERT_TRUE(time.ok());
  EXPECT_EQ(time->size(), 8u);
  EXPECT_EQ(time->FormatLabel(3), "2000-01-01T18:00:00");
  const std::vector<Channel> channels = Resolve(concat, {"t2m", "lsm"});
  ASSERT_EQ(channels[0].time_segments.size(), 2u);
  EXPECT_EQ(channels[0].time_segments[1].begin, 3u);
  EXPECT_EQ(channels[0].time_segments[1].end, 8u);
  EXPECT_EQ(channels[0].time_segments[1].array.url(), b + "/t2m");
  EXPECT_TRUE(channels[1].broadcast);

  // The loader's geometry: dataset index t → the array and its own index.
  LoaderOptions options;
  options.variables = {"t2m"};
  Result<LoaderGeometry> g = MakeLoaderGeometry(concat, options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const auto [array_2, index_2] = TimeSource(*g, 0, 2);
  const auto [array_3, index_3] = TimeSource(*g, 0, 3);
  const auto [array_7, index_7] = TimeSource(*g, 0, 7);
  EXPECT_EQ(index_2, 2u);
  EXPECT_EQ(index_3, 0u);
  EXPECT_EQ(index_7, 4u);
  EXPECT_NE(array_2, array_3);
  EXPECT_EQ(array_3, array_7);
}

TEST(CombinedDatasetTest, ConcatRefusesGapsOverlapsAndMissingVariables) {
  const std::string a = Store("gap_a", 0, 3, {"t2m"});     // hours 0, 6, 12
  const std::string gap = Store("gap_b", 24, 2, {"t2m"});  // 18 is missing
  const std::string overlap = Store("gap_c", 12, 2, {"t2m"});
  const std::string odd = Store("gap_d", 15, 2, {"t2m"});
  const std::string other = Store("gap_e", 18, 2, {"msl"});
  const auto concat = [](const std::string& x, const std::string& y) {
    return Dataset::Open(R"({"concat": [")" + x + R"(", ")" + y + R"("]})");
  };
  ExpectErrorContains(
      concat(a, gap).status(), ErrorCode::kConfig,
      {"gap between " + a + " and " + gap + ": " + a + " ends at 2000-01-01T12:00:00, " + gap +
       " starts at 2000-01-02T00:00:00, and neither holds 2000-01-01T18:00:00"});
  ExpectErrorContains(concat(a, overlap).status(), ErrorCode::kConfig,
                      {a + " and " + overlap + " overlap"});
  ExpectErrorContains(concat(a, odd).status(), ErrorCode::kConfig,
                      {"starts at 2000-01-01T15:00:00, not one step (21600 s) after"});
  Result<Dataset> missing = concat(a, other);
  ASSERT_TRUE(missing.ok());
  auto specs = ParseVariableSpecs(std::vector<std::string>{"t2m"});
  ExpectErrorContains(missing->ResolveChannels(*specs).status(), ErrorCode::kNotFound,
                      {"no variable or channel 't2m' in dataset at " + other});
}

TEST(CombinedDatasetTest, JoinRefusesOtherGridsAndBadForms) {
  const std::string a = Store("grid_a", 0, 2, {"t2m"});
  const std::string b = Store("grid_b", 0, 2, {"z"}, 0.5f);
  ExpectErrorContains(Dataset::Open(JoinedDatasetText({a, b}, JoinDates::kExact)).status(),
                      ErrorCode::kConfig,
                      {"dimension 'latitude' differs at index 0: 0 in " + a + ", 0.5 in " + b});
  ExpectErrorContains(Dataset::Open(R"({"join": [")" + a + R"("], "mode": "outer"})").status(),
                      ErrorCode::kConfig, {"join mode \"outer\""});
  ExpectErrorContains(Dataset::Open("[1]").status(), ErrorCode::kConfig, {"unexpected number"});
  ExpectErrorContains(Dataset::Open("{\"concat\": [").status(), ErrorCode::kConfig, {"not JSON"});
  ExpectErrorContains(Dataset::Open(R"({"concat": [")" + a + R"("], "dim": "latitude"})").status(),
                      ErrorCode::kConfig, {"along a time dimension"});
}

TEST(CombinedDatasetTest, EachStoreHasAnIdentityInTheFormsOrder) {
  const std::string a = Store("identity_a", 0, 3, {"t2m"});
  const std::string b = Store("identity_b", 18, 2, {"t2m"});
  const std::string c = Store("identity_c", 0, 5, {"z"});
  const Dataset one = Open(a);
  ASSERT_EQ(one.store_identities().size(), 1u);
  const StoreIdentity& identity = one.store_identities()[0];
  EXPECT_EQ(identity.url, a);
  EXPECT_EQ(identity.kind, "zarr");
  EXPECT_EQ(identity.id.size(), 64u);  // hex SHA-256 of the metadata documents
  EXPECT_EQ(Open(a).store_identities(), one.store_identities());  // stable across opens
  EXPECT_NE(Open(b).store_identities()[0].id, identity.id);       // other metadata

  const Dataset nested = Open(R"([{"concat": [")" + a + R"(", ")" + b + R"("]}, ")" + c + R"("])");
  std::vector<std::string> urls;
  for (const StoreIdentity& store : nested.store_identities()) urls.push_back(store.url);
  EXPECT_EQ(urls, (std::vector<std::string>{a, b, c}));
  EXPECT_EQ(nested.store_identities()[0], identity);

  // An attribute edited: the array's metadata document, and so the store's identity, changes.
  Result<Group> group = Group::Open(a);
  ASSERT_TRUE(group.ok());
  Result<Array> t2m = group->OpenArray("t2m");
  ASSERT_TRUE(t2m.ok());
  ASSERT_TRUE(t2m->SetAttributes(R"({"units": "K"})").ok());
  EXPECT_NE(Open(a).store_identities()[0].id, identity.id);

  // A member with a ref of its own is an Icechunk repository's: a plain store refuses it.
  ExpectErrorContains(Dataset::Open(R"([{"url": ")" + a + R"(", "ref": "main"}])").status(),
                      ErrorCode::kInvalidArgument, {"no Icechunk repository"});
  ExpectErrorContains(Dataset::Open(R"([{"url": ")" + a + R"(", "mode": 1}])").status(),
                      ErrorCode::kConfig, {"a store is {\"url\""});
}

}  // namespace
}  // namespace zarrstream
