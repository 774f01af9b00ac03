// Rng: a small deterministic pseudo-random generator (xoshiro256**, seeded by SplitMix64).
//
// The core never draws randomness on its own: a driver passes an Rng (or a seed) in, so that equal
// inputs and seed give equal decisions on every platform (std::uniform_int_distribution is not
// portable across standard libraries, so we do our own range reduction).
#pragma once

#include <cstdint>
#include <utility>

namespace arbiter {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_) s = SplitMix(seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform integer in [0, n); n > 0. Lemire's multiply-shift reduction (tiny bias, portable).
  uint64_t Uniform(uint64_t n) {
    __extension__ using U128 = unsigned __int128;
    return static_cast<uint64_t>((static_cast<U128>(Next()) * n) >> 64);
  }

  // Uniform double in [0, 1).
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Fisher-Yates over a random-access range of n elements, from the last one down.
  template <typename RandomIt>
  void Shuffle(RandomIt first, RandomIt last) {
    for (auto i = static_cast<uint64_t>(last - first); i > 1; --i) {
      using std::swap;
      swap(first[i - 1], first[Uniform(i)]);
    }
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace arbiter
