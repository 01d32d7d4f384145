#pragma once
// Private to the context module: the deterministic generator behind input generation and shape
// sampling. splitmix64 (Steele, Lea, Flood 2014): state advances by the golden gamma and each
// output is a bijective mix of the state, so element i of a stream is mix(seed + (i+1)*gamma)
// and can be computed on its own. Only integer arithmetic: identical on every machine.
#include <cstdint>
#include <string_view>

namespace peak::prng {

inline constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Output i (0-based) of the splitmix64 stream seeded with `seed`.
inline uint64_t at(uint64_t seed, uint64_t i) { return mix(seed + (i + 1) * kGamma); }

// FNV-1a, 64-bit.
inline uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix(state_ += kGamma); }
  // Uniform integer in [0, n) without modulo bias (n > 0).
  uint64_t below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
      uint64_t x = next();
      if (x < limit) return x % n;
    }
  }

 private:
  uint64_t state_;
};

// A double in [0, 1) from the top 53 bits.
inline double unit(uint64_t x) { return static_cast<double>(x >> 11) * 0x1.0p-53; }

}  // namespace peak::prng
