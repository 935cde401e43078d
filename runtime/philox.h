// Philox4x32-10 counter-based RNG (Salmon et al. 2011) and the dropout key scheme.
// Header-only and host/device-callable so the CPU and CUDA dropout kernels draw
// the very same bits.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TRAINER_HOST_DEVICE __host__ __device__
#else
#define TRAINER_HOST_DEVICE
#endif

namespace runtime {

struct Philox4x32 {
  uint32_t v[4];
};

TRAINER_HOST_DEVICE inline void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

// Ten rounds of Philox4x32 on `counter` under `key`.
TRAINER_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t key0,
                                                    uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t* c = counter.v;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kMul0, c[0], &hi0, &lo0);
    philox_mulhilo(kMul1, c[2], &hi1, &lo1);
    const uint32_t n0 = hi1 ^ c[1] ^ key0, n1 = lo1, n2 = hi0 ^ c[3] ^ key1, n3 = lo0;
    c[0] = n0, c[1] = n1, c[2] = n2, c[3] = n3;
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// Note [Dropout RNG]
// A dropout mask is a pure function of where it is drawn, never of RNG state:
//   key     = mix(seed, step, global layer, op)            (64 bits -> key0, key1)
//   counter = (element_index / 4 as 64 bits, global sample index, 0)
//   bits    = lane (element_index % 4) of philox4x32_10(counter, key)
// `element_index` is the element's flat coordinate in the *unsharded* per-sample
// tensor (for hidden states (s, h): t * hidden + c; for attention probabilities
// (heads, s, s): (head * s + i) * s + j) and the sample index counts samples of
// the step's global batch. A recompute therefore redraws the same mask without
// saving anything, and a tp/sp/pp/dp layout draws the same masks as one process.
// An element is kept when bits >= dropout_threshold(p).

enum class DropoutOp : uint32_t {
  embedding = 1,
  attention_probs = 2,
  attention_out = 3,
  mlp_out = 4
};

struct DropoutKey {
  uint32_t key0 = 0;
  uint32_t key1 = 0;
};

TRAINER_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// `layer` is the global layer index; the embedding uses layer = num_layers.
inline DropoutKey make_dropout_key(uint64_t seed, uint64_t step, uint32_t layer, DropoutOp op) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ step);
  h = splitmix64(h ^ (static_cast<uint64_t>(layer) << 8 | static_cast<uint32_t>(op)));
  return DropoutKey{static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32)};
}

// Elements whose 32 random bits are below this are dropped: P(drop) = p.
inline uint32_t dropout_threshold(float p) {
  const double t = static_cast<double>(p) * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
}

// The 32 random bits of one element (see Note [Dropout RNG]).
TRAINER_HOST_DEVICE inline uint32_t dropout_bits(DropoutKey key, uint64_t sample,
                                                 uint64_t element_index) {
  const uint64_t block = element_index >> 2;
  Philox4x32 counter{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                      static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32)}};
  return philox4x32_10(counter, key.key0, key.key1).v[element_index & 3];
}

}  // namespace runtime
