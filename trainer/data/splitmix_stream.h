// Note [Portable shuffle]
// std::shuffle and std::uniform_int_distribution are implementation-defined, so
// two standard libraries would feed ranks different samples or corpora. The data
// layer draws from the splitmix64 sequence of a key instead, with unbiased
// bounded draws by rejection.
#pragma once

#include <cstdint>

#include "runtime/philox.h"

namespace trainer {

class SplitMix64Stream {
 public:
  explicit SplitMix64Stream(uint64_t key) : state_(key) {}
  uint64_t next() {
    const uint64_t out = runtime::splitmix64(state_);
    state_ += 0x9E3779B97F4A7C15ull;
    return out;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Uniform in [0, bound): draws below 2^64 mod bound are rejected.
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

 private:
  uint64_t state_;
};

}  // namespace trainer
