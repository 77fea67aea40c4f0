// The synth job in memory stores: presets, layouts, date parsing, what lands where (compared with
// the generator directly), independence from the thread count, overwrite and progress. What
// xarray, zarr-python and compression look like is tested in tests/test_synth.py.
#include "tools/synth_dataset.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "store/store_registry.h"
#include "zarrstream/array.h"

namespace zarrstream::tools {
namespace {

using nlohmann::json;

std::string FreshUrl(const std::string& suffix = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "-" + info->name() + suffix;
  std::replace(name.begin(), name.end(), '/', '-');
  return "memory://synth-" + name;
}

std::map<std::string, std::string> StoreContents(const std::string& url) {
  auto store = OpenStore(url);
  EXPECT_TRUE(store.ok());
  auto keys = (*store)->List("");
  EXPECT_TRUE(keys.ok());
  std::map<std::string, std::string> contents;
  for (const KeyInfo& key : *keys) {
    auto bytes = (*store)->ReadAll(key.key);
    EXPECT_TRUE(bytes.ok());
    contents[key.key] = std::string(bytes->view());
  }
  return contents;
}

SynthOptions SmallOptions(const std::string& url, SynthLayout layout, uint64_t steps = 3) {
  SynthOptions options;
  options.dest_url = url;
  options.preset = "era5-small";
  options.layout = layout;
  options.steps = steps;
  options.seed = 11;
  options.threads = 2;
  return options;
}

TEST(SynthPresetTest, PresetsLayoutsAndDates) {
  auto small = FindSynthPreset("era5-small");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->grid.num_latitudes, 32u);
  EXPECT_EQ(small->grid.num_longitudes, 64u);
  auto full = FindSynthPreset("era5");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->grid.num_points(), 721u * 1440u);
  EXPECT_TRUE(FindSynthPreset("era5-1deg").ok());
  Status unknown = FindSynthPreset("era6").status();
  EXPECT_EQ(unknown.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("era5-1deg"), std::string::npos);

  for (SynthLayout layout : {SynthLayout::kV3Zstd, SynthLayout::kV3Sharded, SynthLayout::kWb2}) {
    auto parsed = ParseSynthLayout(SynthLayoutName(layout));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, layout);
  }
  EXPECT_FALSE(ParseSynthLayout("v4").ok());

  EXPECT_EQ(ParseStartHours("1900-01-01").value(), 0);
  EXPECT_EQ(ParseStartHours("1900-01-01T06").value(), 6);
  EXPECT_EQ(ParseStartHours("1979-01-01").value(), 692496);
  EXPECT_EQ(ParseStartHours("1979-03-01T18:00").value(), 692496 + (31 + 28) * 24 + 18);
  EXPECT_EQ(ParseStartHours("1979-01-01T06:30").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(ParseStartHours("yesterday").ok());
  EXPECT_FALSE(ParseStartHours("1979-02-30").ok());
}

class SynthLayoutTest : public ::testing::TestWithParam<SynthLayout> {};

TEST_P(SynthLayoutTest, WritesEveryVariableWhereTheGeneratorSaysAndConsolidates) {
  const std::string url = FreshUrl();
  SynthOptions options = SmallOptions(url, GetParam());
  options.start = "1979-06-01T12";
  auto report = WriteSynthDataset(options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->arrays, Era5Variables().size() + 4);
  EXPECT_EQ(report->steps, 3u);
  EXPECT_EQ(report->data_bytes, (2 + 3 * 8 + 3 * 13 * 5) * 2048u * 4u);
  EXPECT_EQ(report->fields, 2 + 3 * 8 + 3 * 13 * 5u);

  auto group = Group::Open(url);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_TRUE(group->consolidated());
  EXPECT_EQ(group->zarr_format(), GetParam() == SynthLayout::kWb2 ? 2 : 3);
  const json attributes = json::parse(group->attributes_json());
  EXPECT_EQ(attributes["source"], "zarrstream synth");
  EXPECT_EQ(attributes["preset"], "era5-small");
  EXPECT_EQ(attributes["seed"], 11);
  EXPECT_EQ(attributes["layout"], SynthLayoutName(GetParam()));
  EXPECT_EQ(group->array_names().size(), Era5Variables().size() + 4);

  auto time = group->OpenArray("time");
  ASSERT_TRUE(time.ok());
  std::vector<int64_t> hours(3);
  ASSERT_TRUE(time->ReadAll(hours.data()).ok());
  const int64_t start = ParseStartHours("1979-06-01T12").value();
  EXPECT_EQ(hours, (std::vector<int64_t>{start, start + 6, start + 12}));
  EXPECT_EQ(json::parse(time->attributes_json())["calendar"], "proleptic_gregorian");

  auto preset = FindSynthPreset("era5-small");
  auto generator = Era5FieldGenerator::Make(preset->grid, 11);
  ASSERT_TRUE(generator.ok());
  Era5FieldScratch scratch;
  std::vector<float> expected(2048), read(2048);
  for (const Era5VariableInfo& info : Era5Variables()) {
    auto array = group->OpenArray(info.name);
    ASSERT_TRUE(array.ok()) << info.name;
    EXPECT_EQ(array->dtype(), DataType::kFloat32);
    EXPECT_EQ(json::parse(array->attributes_json())["units"], info.units);
    const size_t level = info.kind == Era5VariableKind::kPressureLevel ? 9 : 0;
    std::vector<uint64_t> origin, shape;
    switch (info.kind) {
      case Era5VariableKind::kSurface:
        EXPECT_EQ(array->dims(), (std::vector<std::string>{"time", "latitude", "longitude"}));
        origin = {2, 0, 0};
        shape = {1, 32, 64};
        break;
      case Era5VariableKind::kPressureLevel:
        EXPECT_EQ(array->shape(), (std::vector<uint64_t>{3, 13, 32, 64}));
        origin = {2, level, 0, 0};
        shape = {1, 1, 32, 64};
        break;
      case Era5VariableKind::kStatic:
        EXPECT_EQ(array->dims(), (std::vector<std::string>{"latitude", "longitude"}));
        origin = {0, 0};
        shape = {32, 64};
        break;
    }
    ASSERT_TRUE(array->Read(origin, shape, read.data()).ok()) << info.name;
    ASSERT_TRUE(generator->Generate(info.variable, start + 12, level, expected, &scratch).ok());
    EXPECT_EQ(read, expected) << info.name;
    if (info.kind == Era5VariableKind::kStatic) continue;
    // Layout: one step per read chunk; sharded layouts keep several steps per stored object.
    EXPECT_EQ(array->chunks()[0], 1u) << info.name;
    EXPECT_EQ(array->shard_shape().has_value(), GetParam() == SynthLayout::kV3Sharded);
    if (GetParam() == SynthLayout::kV3Sharded) {
      EXPECT_EQ(array->grid_shape()[0], 1u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, SynthLayoutTest,
                         ::testing::Values(SynthLayout::kV3Zstd, SynthLayout::kV3Sharded,
                                           SynthLayout::kWb2),
                         [](const auto& param_info) {
                           std::string name(SynthLayoutName(param_info.param));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(SynthDatasetTest, BytesDoNotDependOnTheThreadCount) {
  for (SynthLayout layout : {SynthLayout::kV3Sharded, SynthLayout::kWb2}) {
    const std::string name(SynthLayoutName(layout));
    SynthOptions one = SmallOptions(FreshUrl("-one-" + name), layout, 5);
    one.threads = 1;
    SynthOptions three = SmallOptions(FreshUrl("-three-" + name), layout, 5);
    three.threads = 3;
    ASSERT_TRUE(WriteSynthDataset(one).ok());
    ASSERT_TRUE(WriteSynthDataset(three).ok());
    const auto a = StoreContents(one.dest_url);
    EXPECT_GT(a.size(), 30u);
    EXPECT_EQ(a, StoreContents(three.dest_url)) << name;
  }
}

TEST(SynthDatasetTest, RefusesToOverwriteUnlessAskedAndReplacesEverything) {
  const std::string url = FreshUrl();
  ASSERT_TRUE(WriteSynthDataset(SmallOptions(url, SynthLayout::kWb2)).ok());
  Status again = WriteSynthDataset(SmallOptions(url, SynthLayout::kV3Zstd)).status();
  EXPECT_EQ(again.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(again.message().find("--overwrite"), std::string::npos) << again.message();
  EXPECT_NE(again.message().find(url), std::string::npos) << again.message();

  SynthOptions replace = SmallOptions(url, SynthLayout::kV3Zstd, 2);
  replace.overwrite = true;
  ASSERT_TRUE(WriteSynthDataset(replace).ok());
  for (const auto& [key, value] : StoreContents(url)) {
    EXPECT_EQ(key.find(".z"), std::string::npos) << "v2 leftover " << key;
    EXPECT_EQ(key.find("/2."), std::string::npos) << "stale chunk " << key;
  }
  // And back to v2 over v3.
  SynthOptions back = SmallOptions(url, SynthLayout::kWb2, 1);
  back.overwrite = true;
  ASSERT_TRUE(WriteSynthDataset(back).ok());
  for (const auto& [key, value] : StoreContents(url)) {
    EXPECT_EQ(key.find("zarr.json"), std::string::npos) << "v3 leftover " << key;
  }
}

TEST(SynthDatasetTest, ReportsProgressUpToTheTotalAndRejectsBadOptions) {
  SynthOptions options = SmallOptions(FreshUrl(), SynthLayout::kV3Zstd, 2);
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  options.on_progress = [&](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  auto report = WriteSynthDataset(options);
  ASSERT_TRUE(report.ok());
  ASSERT_GT(calls.size(), 2u);
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_GE(calls[i].first, calls[i - 1].first);
    EXPECT_EQ(calls[i].second, report->data_bytes);
  }
  EXPECT_EQ(calls.back().first, report->data_bytes);
  EXPECT_GT(report->memory_bound_bytes, 0u);

  SynthOptions bad = SmallOptions(FreshUrl("-bad"), SynthLayout::kV3Zstd, 0);
  EXPECT_EQ(WriteSynthDataset(bad).status().code(), ErrorCode::kInvalidArgument);
  bad.steps = 1;
  bad.preset = "era4";
  EXPECT_EQ(WriteSynthDataset(bad).status().code(), ErrorCode::kInvalidArgument);
  bad.preset = "era5-small";
  bad.start = "1979-13-01";
  EXPECT_FALSE(WriteSynthDataset(bad).ok());
}

}  // namespace
}  // namespace zarrstream::tools
