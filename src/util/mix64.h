// Mix64: SplitMix64's finaliser, a fast bijective 64-bit mixer with full avalanche. Used where
// deterministic pseudo-randomness is derived from keys (shuffles, synthetic fields): the same
// input gives the same output on every machine and rank.
#pragma once

#include <cstdint>

namespace zarrstream {

inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace zarrstream
