// The stats file format: a round trip that keeps every bit, and malformed files rejected by field.
#include "dataset/stats_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace zarrstream {
namespace {

TEST(ChannelStatsFileTest, RoundTripsAndRejectsMalformedFiles) {
  ChannelStatsFile file;
  file.source = "file:///data/era5.zarr";
  file.select.push_back({"time", true, {"1979-01-01T00:00:00", "2015-12-31T18:00:00"}, false});
  file.select.push_back({"level", false, {"500", "0.25"}, true});
  ChannelStats t;
  t.name = "temperature@500";
  t.variable = "temperature";
  t.level = 500;
  t.count = 123;
  t.nan_count = 4;
  t.mean = 250.125;
  t.std = 0.1 + 0.2;
  t.min = -1e300;
  t.max = 5e-324;
  file.channels.push_back(t);
  ChannelStats empty;
  empty.name = empty.variable = "t2m";
  empty.mean = empty.std = empty.min = empty.max = NAN;
  file.channels.push_back(empty);
  const std::string text = FormatChannelStats(file);
  EXPECT_EQ(text.find("{\n  \"format\": \"zarrstream.stats/1\",\n  \"source\""), 0u) << text;
  EXPECT_NE(text.find("\"level\": {\n      \"values\": [\n        500,\n        0.25"),
            std::string::npos)
      << text;
  auto parsed = ParseChannelStats(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->source, file.source);
  ASSERT_EQ(parsed->select.size(), 2u);
  EXPECT_EQ(parsed->select[0].labels, file.select[0].labels);
  EXPECT_FALSE(parsed->select[1].is_range);
  EXPECT_TRUE(parsed->select[1].numeric);
  ASSERT_EQ(parsed->channels.size(), 2u);
  const ChannelStats& p = parsed->channels[0];
  EXPECT_EQ(p.name, t.name);
  EXPECT_EQ(p.level, 500.0);
  EXPECT_EQ(p.count, 123u);
  EXPECT_EQ(p.nan_count, 4u);
  EXPECT_EQ(p.mean, t.mean);  // shortest round-trip text: bit exact
  EXPECT_EQ(p.std, t.std);
  EXPECT_EQ(p.min, t.min);
  EXPECT_EQ(p.max, t.max);
  EXPECT_FALSE(parsed->channels[1].level.has_value());
  EXPECT_TRUE(std::isnan(parsed->channels[1].mean));

  struct Bad {
    const char* text;
    const char* message;
  };
  const Bad bad[] = {
      {"[]", "not a JSON object"},
      {"{\"format\": \"other/2\"}", "format 'other/2'"},
      {R"({"format": "zarrstream.stats/1", "source": "x", "select": {}, "channels": [{}]})",
       "channels[0].name"},
      {R"({"format": "zarrstream.stats/1", "source": "x", "select": {"time": ["a"]},
           "channels": []})",
       "select.time"},
      {R"({"format": "zarrstream.stats/1", "source": "x", "select": {}, "channels": [
           {"name": "a", "variable": "a", "level": null, "count": 1, "nan_count": 0,
            "mean": "1", "std": 0, "min": 0, "max": 0}]})",
       "channels[0].mean"},
      {R"({"format": "zarrstream.stats/1", "source": "x", "select": {}, "channels": [
           {"name": "a", "variable": "a", "level": null, "count": -1, "nan_count": 0,
            "mean": 1, "std": 0, "min": 0, "max": 0}]})",
       "channels[0].count"},
      {R"({"format": "zarrstream.stats/1", "source": "x", "select": {}, "channels": [
           {"name": "a", "variable": "a", "level": null, "count": 1, "nan_count": 0,
            "mean": 1, "std": 0, "min": 0, "max": 0,
            "tendencies": {"6": {"count": 1, "nan_count": 0, "mean": 1, "std": "x",
                                 "min": 0, "max": 0}}}]})",
       "channels[0].tendencies.6.std"},
      {R"({"format": "zarrstream.stats/1", "source": "x", "select": {}, "channels": [
           {"name": "a", "variable": "a", "level": null, "count": 1, "nan_count": 0,
            "mean": 1, "std": 0, "min": 0, "max": 0, "tendencies": {"6h": {}}}]})",
       "channels[0].tendencies.6h: expected a positive number of time steps"},
      {R"({"format": "zarrstream.stats/1", "source": "x", "select": {}, "tendency_steps": [0],
           "channels": []})",
       "tendency_steps: expected positive integers"},
  };
  for (const Bad& b : bad) {
    auto r = ParseChannelStats(b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_NE(r.status().message().find(b.message), std::string::npos) << r.status().message();
  }
}

// Tendencies (and the time step they are counted in) round-trip; a static channel has none.
TEST(ChannelStatsFileTest, RoundTripsTendencies) {
  ChannelStatsFile file;
  file.source = "file:///data/era5.zarr";
  file.tendency_steps = {1, 4};
  file.time_step_seconds = 21600;
  ChannelStats t;
  t.name = t.variable = "t2m";
  t.tendencies.push_back({1, 10, 2, 0.125, 0.1 + 0.2, -3, 4});
  t.tendencies.push_back({4, 7, 0, NAN, NAN, NAN, NAN});
  file.channels.push_back(t);
  ChannelStats lsm;
  lsm.name = lsm.variable = "land_sea_mask";
  file.channels.push_back(lsm);
  const std::string text = FormatChannelStats(file);
  auto parsed = ParseChannelStats(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->tendency_steps, file.tendency_steps);
  EXPECT_EQ(parsed->time_step_seconds, 21600);
  ASSERT_EQ(parsed->channels[0].tendencies.size(), 2u);
  const TendencyStats& one = parsed->channels[0].tendencies[0];
  EXPECT_EQ(one.steps, 1u);
  EXPECT_EQ(one.count, 10u);
  EXPECT_EQ(one.nan_count, 2u);
  EXPECT_EQ(one.mean, 0.125);
  EXPECT_EQ(one.std, 0.1 + 0.2);
  EXPECT_EQ(one.min, -3);
  EXPECT_EQ(one.max, 4);
  EXPECT_EQ(parsed->channels[0].tendencies[1].steps, 4u);
  EXPECT_TRUE(std::isnan(parsed->channels[0].tendencies[1].mean));
  EXPECT_TRUE(parsed->channels[1].tendencies.empty());
  EXPECT_EQ(text.find("\"tendencies\"", text.find("land_sea_mask")), std::string::npos) << text;
  // A file without tendencies has none.
  file.tendency_steps.clear();
  file.time_step_seconds.reset();
  file.channels.resize(1);
  file.channels[0].tendencies.clear();
  const std::string plain = FormatChannelStats(file);
  EXPECT_EQ(plain.find("tend"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("time_step_seconds"), std::string::npos) << plain;
}

}  // namespace
}  // namespace zarrstream
