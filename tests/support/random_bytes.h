// Test support: reproducible pseudo-random bytes (the same for a seed).
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace tern::testing {

inline std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace tern::testing
