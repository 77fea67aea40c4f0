// Small formatting helpers for messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace zarrstream {

// "(3,0,12)": grid coordinates and shapes in error messages.
inline std::string FormatIndex(std::span<const uint64_t> index, const char* separator = ",") {
  std::string s = "(";
  for (size_t i = 0; i < index.size(); ++i) {
    if (i > 0) s += separator;
    s += std::to_string(index[i]);
  }
  s += ")";
  return s;
}

// `items` (strings, string views or numbers) with `separator` between them: "a, b, c".
template <typename Items>
std::string Join(const Items& items, std::string_view separator = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    first = false;
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(item)>>) {
      out += std::to_string(item);
    } else {
      out += item;
    }
  }
  return out;
}

inline std::string Join(std::initializer_list<std::string_view> items,
                        std::string_view separator = ", ") {
  return Join<std::initializer_list<std::string_view>>(items, separator);
}

// "1.5 GB", "12.0 MB", "512 B": decimal units, as sizes and throughput are usually quoted.
inline std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int unit = 0;
  while (bytes >= 1000.0 && unit < 5) {
    bytes /= 1000.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

}  // namespace zarrstream
