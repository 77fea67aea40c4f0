// Small formatting helpers for messages.
#pragma once

#include <cstdint>
#include <span>
#include <string>

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

}  // namespace zarrstream
