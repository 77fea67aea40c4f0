// The values of the computed forcings (dataset/computed_forcings.h) at one valid time and grid
// point, in float64: shared by the CPU loader and the GPU kernel (gpu/kernels.cu), so both compute
// the same arithmetic in the same order. Plain C++ that nvcc also compiles (no CUDA header, no
// standard library beyond the math functions).
//
// The definitions are those of ECMWF's earthkit-data "forcings" source (which anemoi-datasets uses
// for its computed forcings) and, for the solar zenith angle, earthkit-meteo's
// cos_solar_zenith_angle (release 1.2.1, earthkit.meteo.solar.array); the operations keep their
// order so that float64 results match numpy's:
//   julian_day   = whole days since 1 January 00:00 of the valid time's year + seconds / 86400
//   cos/sin_julian_day = cos/sin(julian_day / 365.25 × π × 2)
//   local_time   = (longitude / 360 × 24 + seconds since midnight UTC / 86400 × 24) mod 24
//   cos/sin_local_time = cos/sin(local_time / 24 × π × 2)
//   cos_solar_zenith_angle = max(0, sin δ sin φ + cos δ cos φ cos h), with the declination δ and
//   the
//     time correction t (Fourier series in the julian-day angle) and the hour angle
//     h = ((hour − 12) × 15 + longitude + t) in degrees, hour the UTC time of day in hours;
//   insolation   = cos_solar_zenith_angle (earthkit-data's alias).
// Times are seconds since 1970-01-01T00:00 UTC on the proleptic Gregorian calendar.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define ZS_FORCING_FN __host__ __device__ inline
#else
#define ZS_FORCING_FN inline
#endif

namespace zarrstream::forcing_math {

// The computed forcings, in the order of dataset/computed_forcings.cc's names.
enum Kind : uint32_t {
  kCosLatitude = 0,
  kSinLatitude = 1,
  kCosLongitude = 2,
  kSinLongitude = 3,
  kCosJulianDay = 4,
  kSinJulianDay = 5,
  kCosLocalTime = 6,
  kSinLocalTime = 7,
  kCosSolarZenithAngle = 8,
  kInsolation = 9,
  kNumKinds = 10,
};

constexpr double kPi = 3.141592653589793;

// numpy's deg2rad: x × (π / 180).
ZS_FORCING_FN double Radians(double degrees) { return degrees * (kPi / 180.0); }

// Days since 1970-01-01 of date y-m-d (proleptic Gregorian): counted from 0000-03-01 in 400-year
// eras of 146097 days, so that the leap day ends a year.
ZS_FORCING_FN int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// The year of day `days` since 1970-01-01.
ZS_FORCING_FN int64_t YearOfDay(int64_t days) {
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t month = mp < 10 ? mp + 3 : mp - 9;
  return yoe + era * 400 + (month <= 2 ? 1 : 0);
}

// Floor division and remainder of `seconds` by a day.
ZS_FORCING_FN int64_t DayOf(int64_t seconds) {
  return seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400);
}

ZS_FORCING_FN double JulianDay(int64_t seconds) {
  const int64_t day = DayOf(seconds);
  const int64_t within = seconds - day * 86400;
  return static_cast<double>(day - DaysFromCivil(YearOfDay(day), 1, 1)) +
         static_cast<double>(within) / 86400.0;
}

// Python's float x % 24 (the result has the divisor's sign).
ZS_FORCING_FN double Modulo24(double x) {
  double r = fmod(x, 24.0);
  if (r != 0) {
    if (r < 0) r += 24.0;
  } else {
    r = 0.0;
  }
  return r;
}

ZS_FORCING_FN double LocalTime(int64_t seconds, double longitude) {
  const int64_t within = seconds - DayOf(seconds) * 86400;
  const double hours_since_midnight = (0.0 + static_cast<double>(within) / 86400.0) * 24;
  return Modulo24(longitude / 360.0 * 24.0 + hours_since_midnight);
}

// The sun's declination (radians) and the time correction (degrees) at `seconds`.
ZS_FORCING_FN void SolarDeclination(int64_t seconds, double* declination, double* time_correction) {
  const double angle = JulianDay(seconds) / 365.25 * kPi * 2;
  const double degrees = 0.396372 - 22.91327 * cos(angle) + 4.025430 * sin(angle) -
                         0.387205 * cos(2 * angle) + 0.051967 * sin(2 * angle) -
                         0.154527 * cos(3 * angle) + 0.084798 * sin(3 * angle);
  *time_correction = 0.004297 + 0.107029 * cos(angle) - 1.837877 * sin(angle) -
                     0.837378 * cos(2 * angle) - 2.340475 * sin(2 * angle);
  *declination = Radians(degrees);
}

// The time of day in hours: hour + minute / 60 + second / 3600, summed in that order.
ZS_FORCING_FN double DayHours(int64_t seconds) {
  const int64_t within = seconds - DayOf(seconds) * 86400;
  // Whole hours and whole minutes (integer division on purpose), as the reference sums them.
  const int64_t hours = within / 3600;
  const int64_t minutes = within % 3600 / 60;
  return static_cast<double>(hours) + static_cast<double>(minutes) / 60.0 +
         static_cast<double>(within % 60) / 3600.0;
}

// cos of the hour angle at `longitude`.
ZS_FORCING_FN double CosHourAngle(double hours, double time_correction, double longitude) {
  return cos(Radians((hours - 12) * 15 + longitude + time_correction));
}

// sin δ sin φ + cos δ cos φ cos h, clipped at 0; the CPU computes the terms once per row and
// column of a grid, with the same arithmetic.
ZS_FORCING_FN double ClippedZenith(double sindec_sinlat, double cosdec_coslat, double cos_hour) {
  const double zenith = sindec_sinlat + cosdec_coslat * cos_hour;
  return zenith < 0.0 ? 0.0 : zenith;
}

ZS_FORCING_FN double CosSolarZenithAngle(int64_t seconds, double latitude, double longitude) {
  double d = 0, time_correction = 0;
  SolarDeclination(seconds, &d, &time_correction);
  const double phi = Radians(latitude);
  return ClippedZenith(sin(d) * sin(phi), cos(d) * cos(phi),
                       CosHourAngle(DayHours(seconds), time_correction, longitude));
}

// Forcing `kind` at valid time `seconds`, latitude and longitude in degrees.
ZS_FORCING_FN double Value(uint32_t kind, int64_t seconds, double latitude, double longitude) {
  switch (kind) {
    case kCosLatitude:
      return cos(Radians(latitude));
    case kSinLatitude:
      return sin(Radians(latitude));
    case kCosLongitude:
      return cos(Radians(longitude));
    case kSinLongitude:
      return sin(Radians(longitude));
    case kCosJulianDay:
      return cos(JulianDay(seconds) / 365.25 * kPi * 2);
    case kSinJulianDay:
      return sin(JulianDay(seconds) / 365.25 * kPi * 2);
    case kCosLocalTime:
      return cos(LocalTime(seconds, longitude) / 24 * kPi * 2);
    case kSinLocalTime:
      return sin(LocalTime(seconds, longitude) / 24 * kPi * 2);
    case kCosSolarZenithAngle:
    case kInsolation:
      return CosSolarZenithAngle(seconds, latitude, longitude);
    default:
      return NAN;
  }
}

}  // namespace zarrstream::forcing_math
