// Philox4x32-10 counter-based RNG (Salmon et al. 2011), the dropout key scheme and the
// parameter init draws. Header-only and host/device-callable so the CPU and CUDA kernels draw
// the very same bits.
#pragma once

#include <math.h>

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

// Note [Parameter init RNG]
// Element `index` of the parameter tensor with id `tensor_id`, under `seed`: a standard normal
// by Box-Muller on the four words of one Philox block (counter (index, 0x1417, 0), key from
// splitmix64 of the seed and the id), in double, rounded to float. The host and the device call
// the same code; the device's double log and cos may differ from the host's in the last bit of
// the double, which the rounding to float almost always absorbs (the twin tolerance covers the
// rest).
TRAINER_HOST_DEVICE inline float philox_normal(uint64_t seed, uint64_t tensor_id, uint64_t index) {
  const uint64_t key = splitmix64(seed ^ splitmix64(tensor_id + 0x5eed));
  Philox4x32 counter{
      {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0x1417u, 0}};
  const Philox4x32 r =
      philox4x32_10(counter, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  const uint64_t a = (static_cast<uint64_t>(r.v[0]) << 32 | r.v[1]) >> 11;
  const uint64_t b = (static_cast<uint64_t>(r.v[2]) << 32 | r.v[3]) >> 11;
  const double u1 = (static_cast<double>(a) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(b) * 0x1.0p-53;
  return static_cast<float>(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

// One parameter tensor's shard (rows, cols) of an unsharded (.., global_cols) tensor whose
// element (row_offset + r, col_offset + c) it holds at (r, c).
struct ParamInit {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t global_cols = 0;
  int64_t row_offset = 0;
  int64_t col_offset = 0;
  int64_t zero_rows_from = INT64_MAX;  // global rows from here on are 0 (padded vocabulary)
  bool normal = false;                 // false: every element is `fill`
  float fill = 0.f;
  float std_dev = 0.f;
  uint64_t seed = 0;
  uint64_t tensor_id = 0;
};

// The initial value of element (r, c) of the shard.
TRAINER_HOST_DEVICE inline float param_init_value(const ParamInit& p, int64_t r, int64_t c) {
  if (!p.normal) return p.fill;
  const int64_t global_row = p.row_offset + r;
  if (global_row >= p.zero_rows_from) return 0.f;
  const auto index = static_cast<uint64_t>(global_row * p.global_cols + c + p.col_offset);
  return p.std_dev * philox_normal(p.seed, p.tensor_id, index);
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
