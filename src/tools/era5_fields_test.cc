#include "tools/era5_fields.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace zarrstream::tools {
namespace {

// 1979-01-01T00 and 1979-07-01T00 in hours since 1900-01-01.
constexpr int64_t kJanuary1979 = 692496;
constexpr int64_t kJuly1979 = kJanuary1979 + 181 * 24;

// A 2° grid: fast, yet fine enough for spatial statistics.
const Era5Grid kGrid{91, 180, /*includes_poles=*/true};

constexpr size_t kLevel50 = 0;
constexpr size_t kLevel250 = 4;
constexpr size_t kLevel1000 = 12;

class Era5FieldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = Era5FieldGenerator::Make(kGrid, 7);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    generator_.emplace(*made);
  }

  std::vector<float> Field(Era5Variable variable, int64_t hours, size_t level = 0,
                           const Era5FieldGenerator* generator = nullptr) {
    std::vector<float> out(kGrid.num_points());
    const Era5FieldGenerator& g = generator ? *generator : *generator_;
    Status status = g.Generate(variable, hours, level, out, &scratch_);
    EXPECT_TRUE(status.ok()) << status.ToString();
    return out;
  }

  std::optional<Era5FieldGenerator> generator_;
  Era5FieldScratch scratch_;
};

size_t LevelsOf(Era5Variable variable) {
  return Era5VariableInfoFor(variable).kind == Era5VariableKind::kPressureLevel
             ? kEra5PressureLevelsHpa.size()
             : 1;
}

double Mean(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double StdDev(const std::vector<float>& v) {
  const double mean = Mean(v);
  double sum = 0;
  for (float x : v) sum += (x - mean) * (x - mean);
  return std::sqrt(sum / static_cast<double>(v.size()));
}

// Mean over the rows whose latitude lies in [lo, hi].
double BandMean(const std::vector<float>& v, double lo, double hi) {
  double sum = 0;
  size_t n = 0;
  for (size_t i = 0; i < kGrid.num_latitudes; ++i) {
    const double lat = kGrid.latitude(i);
    if (lat < lo || lat > hi) continue;
    for (size_t j = 0; j < kGrid.num_longitudes; ++j) sum += v[i * kGrid.num_longitudes + j];
    n += kGrid.num_longitudes;
  }
  return sum / static_cast<double>(n);
}

double ZonalMean(const std::vector<float>& v, size_t row) {
  double sum = 0;
  for (size_t j = 0; j < kGrid.num_longitudes; ++j) sum += v[row * kGrid.num_longitudes + j];
  return sum / kGrid.num_longitudes;
}

TEST(Era5GridTest, CoordinatesRunNorthToSouthAndEastFromZero) {
  const Era5Grid with_poles{721, 1440, true};
  EXPECT_DOUBLE_EQ(with_poles.latitude(0), 90.0);
  EXPECT_DOUBLE_EQ(with_poles.latitude(360), 0.0);
  EXPECT_DOUBLE_EQ(with_poles.latitude(720), -90.0);
  EXPECT_DOUBLE_EQ(with_poles.longitude(0), 0.0);
  EXPECT_DOUBLE_EQ(with_poles.longitude(1439), 359.75);
  // WeatherBench2's 5.625° grid: cell centres, no pole rows.
  const Era5Grid without_poles{32, 64, false};
  EXPECT_DOUBLE_EQ(without_poles.latitude(0), 87.1875);
  EXPECT_DOUBLE_EQ(without_poles.latitude(31), -87.1875);
  EXPECT_DOUBLE_EQ(without_poles.longitude(63), 354.375);
  EXPECT_EQ(without_poles.num_points(), 2048u);
}

TEST(Era5VariablesTest, TableListsEveryVariableOnceWithMetadata) {
  std::set<std::string_view> names;
  size_t surface = 0, levels = 0, statics = 0;
  for (size_t i = 0; i < Era5Variables().size(); ++i) {
    const Era5VariableInfo& info = Era5Variables()[i];
    EXPECT_EQ(static_cast<size_t>(info.variable), i);
    EXPECT_EQ(&Era5VariableInfoFor(info.variable), &info);
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_FALSE(info.units.empty());
    EXPECT_FALSE(info.long_name.empty());
    EXPECT_FALSE(info.standard_name.empty());
    surface += info.kind == Era5VariableKind::kSurface;
    levels += info.kind == Era5VariableKind::kPressureLevel;
    statics += info.kind == Era5VariableKind::kStatic;
  }
  EXPECT_EQ(surface, 8u);
  EXPECT_EQ(levels, 5u);
  EXPECT_EQ(statics, 2u);
  EXPECT_EQ(Era5VariableInfoFor(Era5Variable::k2mTemperature).name, "2m_temperature");
  EXPECT_EQ(Era5VariableInfoFor(Era5Variable::kGeopotential).units, "m**2 s**-2");
}

TEST(Era5FieldGeneratorTest, RejectsTinyGridsWrongSizesAndLevels) {
  EXPECT_EQ(Era5FieldGenerator::Make({3, 64, true}, 0).status().code(),
            ErrorCode::kInvalidArgument);
  auto generator = Era5FieldGenerator::Make({8, 16, true}, 0);
  ASSERT_TRUE(generator.ok());
  Era5FieldScratch scratch;
  std::vector<float> small(127), out(128);
  Status s = generator->Generate(Era5Variable::kTemperature, 0, 0, small, &scratch);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("temperature"), std::string::npos) << s.message();
  s = generator->Generate(Era5Variable::kTemperature, 0, 13, out, &scratch);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("level index 13"), std::string::npos) << s.message();
  EXPECT_EQ(generator->Generate(Era5Variable::k2mTemperature, 0, 1, out, &scratch).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_TRUE(generator->Generate(Era5Variable::kTemperature, 0, 12, out, &scratch).ok());
}

TEST_F(Era5FieldsTest, SameSeedGivesIdenticalBytesWhateverTheOrderScratchOrThread) {
  auto again = Era5FieldGenerator::Make(kGrid, 7);
  ASSERT_TRUE(again.ok());
  for (const Era5VariableInfo& info : Era5Variables()) {
    for (size_t level : {size_t{0}, LevelsOf(info.variable) - 1}) {
      const std::vector<float> a = Field(info.variable, kJanuary1979 + 6, level);
      // Another generator, a scratch that has served other variables, another thread.
      std::vector<float> b(kGrid.num_points());
      std::thread worker([&] {
        Era5FieldScratch scratch;
        std::vector<float> other(kGrid.num_points());
        ASSERT_TRUE(
            again->Generate(Era5Variable::kVComponentOfWind, kJuly1979, 3, other, &scratch).ok());
        ASSERT_TRUE(again->Generate(info.variable, kJanuary1979 + 6, level, b, &scratch).ok());
      });
      worker.join();
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << info.name << " level " << level;
    }
  }
}

TEST_F(Era5FieldsTest, DifferentSeedsGiveDifferentWeatherButTheSameSun) {
  auto other = Era5FieldGenerator::Make(kGrid, 8);
  ASSERT_TRUE(other.ok());
  for (const Era5VariableInfo& info : Era5Variables()) {
    const std::vector<float> a = Field(info.variable, kJanuary1979, 0);
    const std::vector<float> b = Field(info.variable, kJanuary1979, 0, &*other);
    size_t differing = 0;
    for (size_t k = 0; k < a.size(); ++k) differing += a[k] != b[k];
    if (info.variable == Era5Variable::kTopOfAtmosphereIncidentSolarRadiation) {
      EXPECT_EQ(differing, 0u) << "solar radiation is a forcing, independent of the seed";
    } else {
      EXPECT_GT(differing, a.size() / 4) << info.name;
    }
  }
}

TEST_F(Era5FieldsTest, ValuesStayInRealisticRanges) {
  struct Range {
    Era5Variable variable;
    double min, max;
  };
  const Range ranges[] = {
      {Era5Variable::k2mTemperature, 185, 330},
      {Era5Variable::k10mUComponentOfWind, -35, 35},
      {Era5Variable::k10mVComponentOfWind, -35, 35},
      {Era5Variable::kMeanSeaLevelPressure, 94000, 108000},
      {Era5Variable::kSurfacePressure, 45000, 108000},
      {Era5Variable::kTotalPrecipitation, 0, 0.1},
      {Era5Variable::kTopOfAtmosphereIncidentSolarRadiation, 0, 1361 * 1.04 * 3600},
      {Era5Variable::kTotalColumnWaterVapour, 0.1, 90},
      {Era5Variable::kGeopotential, -6000, 2.3e5},
      {Era5Variable::kTemperature, 170, 330},
      {Era5Variable::kUComponentOfWind, -80, 120},
      {Era5Variable::kVComponentOfWind, -80, 80},
      {Era5Variable::kSpecificHumidity, 1e-7, 0.04},
      {Era5Variable::kLandSeaMask, 0, 1},
      {Era5Variable::kGeopotentialAtSurface, -1000, 9.81 * 9000},
  };
  ASSERT_EQ(std::size(ranges), Era5Variables().size());
  for (const Range& range : ranges) {
    const std::string_view name = Era5VariableInfoFor(range.variable).name;
    for (int64_t hours : {kJanuary1979, kJuly1979 + 18}) {
      for (size_t level = 0; level < LevelsOf(range.variable); ++level) {
        const std::vector<float> f = Field(range.variable, hours, level);
        const auto [lo, hi] = std::minmax_element(f.begin(), f.end());
        EXPECT_GE(*lo, range.min) << name << " level " << level;
        EXPECT_LE(*hi, range.max) << name << " level " << level;
        EXPECT_GT(*hi, *lo) << name << " is constant";
        for (float v : f) ASSERT_TRUE(std::isfinite(v)) << name;
      }
    }
  }
}

TEST_F(Era5FieldsTest, VerticalStructureFollowsTheAtmosphere) {
  double previous_height = -1e9, previous_humidity = 0;
  for (size_t level = kEra5PressureLevelsHpa.size(); level-- > 0;) {
    // Geopotential grows with height, specific humidity falls with it.
    const double height = Mean(Field(Era5Variable::kGeopotential, kJanuary1979, level));
    const double humidity = Mean(Field(Era5Variable::kSpecificHumidity, kJanuary1979, level));
    EXPECT_GT(height, previous_height) << kEra5PressureLevelsHpa[level] << " hPa";
    if (previous_humidity > 0) {
      EXPECT_LT(humidity, previous_humidity) << kEra5PressureLevelsHpa[level] << " hPa";
    }
    previous_height = height;
    previous_humidity = humidity;
  }
  const double z1000 = Mean(Field(Era5Variable::kGeopotential, kJanuary1979, kLevel1000));
  const double z50 = Mean(Field(Era5Variable::kGeopotential, kJanuary1979, kLevel50));
  EXPECT_GT(z1000, 0);
  EXPECT_LT(z1000, 3000);
  EXPECT_GT(z50, 1.8e5);
  EXPECT_LT(z50, 2.2e5);
  const double q1000 = Mean(Field(Era5Variable::kSpecificHumidity, kJanuary1979, kLevel1000));
  const double q50 = Mean(Field(Era5Variable::kSpecificHumidity, kJanuary1979, kLevel50));
  EXPECT_GT(q1000, 3e-3);
  EXPECT_LT(q1000, 2e-2);
  EXPECT_GT(q50, 1e-6);
  EXPECT_LT(q50, 1e-5);
}

TEST_F(Era5FieldsTest, JetsBlowAt250HectopascalsInTheSubtropics) {
  const std::vector<float> upper = Field(Era5Variable::kUComponentOfWind, kJanuary1979, kLevel250);
  const std::vector<float> lower = Field(Era5Variable::kUComponentOfWind, kJanuary1979, kLevel1000);
  double strongest = 0, strongest_latitude = 0, strongest_lower = 0;
  for (size_t i = 0; i < kGrid.num_latitudes; ++i) {
    const double u = ZonalMean(upper, i);
    if (u > strongest) {
      strongest = u;
      strongest_latitude = kGrid.latitude(i);
    }
    strongest_lower = std::max(strongest_lower, std::abs(ZonalMean(lower, i)));
  }
  EXPECT_GT(strongest, 25.0);
  EXPECT_GT(std::abs(strongest_latitude), 20.0);
  EXPECT_LT(std::abs(strongest_latitude), 50.0);
  EXPECT_LT(strongest_lower, 15.0);
}

TEST_F(Era5FieldsTest, FieldsAreSmoothButNotFlat) {
  const size_t nlon = kGrid.num_longitudes;
  for (const Era5VariableInfo& info : Era5Variables()) {
    for (size_t level = 0; level < LevelsOf(info.variable); level += 4) {
      const std::vector<float> f = Field(info.variable, kJanuary1979 + 12, level);
      double east = 0, south = 0;
      for (size_t i = 0; i + 1 < kGrid.num_latitudes; ++i) {
        for (size_t j = 0; j < nlon; ++j) {
          const size_t k = i * nlon + j;
          east += std::abs(f[i * nlon + (j + 1) % nlon] - f[k]);
          south += std::abs(f[k + nlon] - f[k]);
        }
      }
      const double n = static_cast<double>((kGrid.num_latitudes - 1) * nlon);
      // Winds are gradients of the height field and precipitation is intermittent: rougher, as
      // in ERA5.
      const bool rough =
          info.units == "m s**-1" || info.variable == Era5Variable::kTotalPrecipitation;
      const double limit = (rough ? 0.25 : 0.1) * StdDev(f);
      EXPECT_LT(east / n, limit) << info.name << " level " << level;
      EXPECT_LT(south / n, limit) << info.name << " level " << level;
      // Variability reaches the grid scale: neighbours are rarely equal (except where a field
      // is exactly zero: dry areas, the night side, pure land or sea).
      size_t equal = 0, nonzero = 0;
      for (size_t k = 0; k + 1 < f.size(); ++k) {
        if (f[k] == 0 || f[k] == 1) continue;
        ++nonzero;
        equal += f[k] == f[k + 1];
      }
      EXPECT_LT(static_cast<double>(equal), 0.05 * static_cast<double>(nonzero)) << info.name;
    }
  }
}

TEST_F(Era5FieldsTest, TwoMetreTemperatureHasADiurnalCycleStrongerOverLand) {
  const size_t nlon = kGrid.num_longitudes;
  const std::vector<float> land = Field(Era5Variable::kLandSeaMask, 0);
  std::vector<std::vector<float>> day;
  for (int step = 0; step < 4; ++step) {
    day.push_back(Field(Era5Variable::k2mTemperature, kJuly1979 + 6 * step));
  }
  // Regress each point's deviation from its daily mean on the cosine of local solar time
  // (peaking 14:30): the amplitude, averaged over land and over sea, within 50° of the equator.
  double land_amplitude = 0, sea_amplitude = 0;
  size_t land_points = 0, sea_points = 0;
  for (size_t i = 0; i < kGrid.num_latitudes; ++i) {
    if (std::abs(kGrid.latitude(i)) > 50) continue;
    for (size_t j = 0; j < nlon; ++j) {
      const size_t k = i * nlon + j;
      double mean = 0;
      for (const auto& f : day) mean += f[k] / 4.0;
      double covariance = 0, variance = 0;
      for (int step = 0; step < 4; ++step) {
        const double local_hours = 6.0 * step + kGrid.longitude(j) / 15.0;
        const double c = std::cos(2 * std::numbers::pi * (local_hours - 14.5) / 24.0);
        covariance += (day[step][k] - mean) * c;
        variance += c * c;
      }
      const double amplitude = covariance / variance;
      if (land[k] > 0.9) {
        land_amplitude += amplitude;
        ++land_points;
      } else if (land[k] < 0.1) {
        sea_amplitude += amplitude;
        ++sea_points;
      }
    }
  }
  ASSERT_GT(land_points, 100u);
  ASSERT_GT(sea_points, 100u);
  land_amplitude /= static_cast<double>(land_points);
  sea_amplitude /= static_cast<double>(sea_points);
  EXPECT_GT(land_amplitude, 3.0);
  EXPECT_LT(std::abs(sea_amplitude), 1.0);
}

TEST_F(Era5FieldsTest, SeasonsAreHemispheric) {
  const std::vector<float> january = Field(Era5Variable::k2mTemperature, kJanuary1979 + 240);
  const std::vector<float> july = Field(Era5Variable::k2mTemperature, kJuly1979 + 240);
  EXPECT_GT(BandMean(july, 30, 70) - BandMean(january, 30, 70), 8.0);
  // The southern midlatitudes are mostly ocean: a milder cycle.
  EXPECT_GT(BandMean(january, -70, -30) - BandMean(july, -70, -30), 2.5);
  // The sun: the North Pole is dark in January and lit in July.
  const std::vector<float> dark =
      Field(Era5Variable::kTopOfAtmosphereIncidentSolarRadiation, kJanuary1979 + 240);
  const std::vector<float> lit =
      Field(Era5Variable::kTopOfAtmosphereIncidentSolarRadiation, kJuly1979 + 240);
  EXPECT_EQ(BandMean(dark, 80, 90), 0.0);
  EXPECT_GT(BandMean(lit, 80, 90), 1.5e6);
}

TEST_F(Era5FieldsTest, SolarRadiationFollowsTheSun) {
  // The value at 00 UTC is the energy of the hour before, centred on 23:30 UTC, when it is noon
  // at 187.5° east and midnight at 7.5°.
  const std::vector<float> f =
      Field(Era5Variable::kTopOfAtmosphereIncidentSolarRadiation, kJuly1979);
  const size_t equator = 45;
  ASSERT_EQ(kGrid.latitude(equator), 0.0);
  // July: declination ~23°, Earth near aphelion (S = 1361 · 0.967 W m-2).
  const double noon = 1361 * 0.967 * 3600 * std::cos(23.0 * std::numbers::pi / 180);
  EXPECT_NEAR(f[equator * kGrid.num_longitudes + 94], noon, 0.01 * noon);
  EXPECT_EQ(f[equator * kGrid.num_longitudes + 4], 0.0f);
  for (float v : f) EXPECT_GE(v, 0.0f);
}

TEST_F(Era5FieldsTest, PrecipitationIsNonNegativeMostlySmallWithManyZeros) {
  for (int64_t hours : {kJanuary1979, kJuly1979 + 6}) {
    const std::vector<float> f = Field(Era5Variable::kTotalPrecipitation, hours);
    size_t zeros = 0, heavy = 0;
    for (float v : f) {
      ASSERT_GE(v, 0.0f);
      zeros += v == 0.0f;
      heavy += v > 2e-3f;  // 2 mm in 6 hours
    }
    EXPECT_GT(zeros, f.size() / 5);
    EXPECT_LT(zeros, f.size() * 9 / 10);
    EXPECT_GT(heavy, 0u);
    EXPECT_LT(heavy, f.size() / 20);
    EXPECT_LT(Mean(f), 2e-3);  // < 8 mm a day on average
  }
}

TEST_F(Era5FieldsTest, StaticFieldsHaveRealisticContinentsAndIgnoreTime) {
  const std::vector<float> land = Field(Era5Variable::kLandSeaMask, kJanuary1979);
  const std::vector<float> height = Field(Era5Variable::kGeopotentialAtSurface, kJanuary1979);
  EXPECT_EQ(land, Field(Era5Variable::kLandSeaMask, kJuly1979));
  EXPECT_EQ(height, Field(Era5Variable::kGeopotentialAtSurface, kJuly1979));
  double area = 0, land_area = 0, land_height = 0, sea_height = 0;
  size_t land_points = 0, sea_points = 0, coast = 0;
  for (size_t i = 0; i < kGrid.num_latitudes; ++i) {
    const double w = std::cos(kGrid.latitude(i) * std::numbers::pi / 180);
    for (size_t j = 0; j < kGrid.num_longitudes; ++j) {
      const size_t k = i * kGrid.num_longitudes + j;
      area += w;
      land_area += w * land[k];
      coast += land[k] > 0 && land[k] < 1;
      if (land[k] == 1) {
        land_height += height[k];
        ++land_points;
      } else if (land[k] == 0) {
        sea_height += std::abs(height[k]);
        ++sea_points;
      }
    }
  }
  EXPECT_NEAR(land_area / area, 0.29, 0.02);
  EXPECT_GT(coast, 0u);
  EXPECT_GT(land_height / land_points, 9.81 * 300);
  EXPECT_LT(sea_height / sea_points, 9.81 * 5);
  EXPECT_GT(BandMean(land, -90, -75), 0.9);  // Antarctica
}

TEST_F(Era5FieldsTest, WeatherDriftsEastInMidlatitudes) {
  // The zonal cross-correlation of 500 hPa height anomalies a day apart, summed over the rows of
  // 30-60° of each hemisphere and ten start days: its peak is at an eastward shift of a few
  // degrees (weather also evolves, so single rows and days are noisy).
  const size_t nlon = kGrid.num_longitudes;
  constexpr int kMaxShift = 30;
  std::vector<double> north(2 * kMaxShift + 1), south(2 * kMaxShift + 1);
  for (int day = 0; day < 10; ++day) {
    const int64_t hours = kJanuary1979 + 240 * day;
    const std::vector<float> before = Field(Era5Variable::kGeopotential, hours, 7);
    const std::vector<float> after = Field(Era5Variable::kGeopotential, hours + 24, 7);
    for (size_t i = 0; i < kGrid.num_latitudes; ++i) {
      const double lat = std::abs(kGrid.latitude(i));
      if (lat < 30 || lat > 60) continue;
      std::vector<double>& sums = kGrid.latitude(i) > 0 ? north : south;
      const double mean_before = ZonalMean(before, i), mean_after = ZonalMean(after, i);
      for (int shift = -kMaxShift; shift <= kMaxShift; ++shift) {
        for (size_t j = 0; j < nlon; ++j) {
          const size_t from = static_cast<size_t>(static_cast<int>(j + nlon) - shift) % nlon;
          sums[shift + kMaxShift] +=
              (after[i * nlon + j] - mean_after) * (before[i * nlon + from] - mean_before);
        }
      }
    }
  }
  for (const std::vector<double>* sums : {&north, &south}) {
    const int best =
        static_cast<int>(std::max_element(sums->begin(), sums->end()) - sums->begin()) - kMaxShift;
    EXPECT_GE(best, 1) << (sums == &north ? "north" : "south");
    EXPECT_LE(best, 6) << (sums == &north ? "north" : "south");  // 2°-12° a day
  }
}

}  // namespace
}  // namespace zarrstream::tools
