// Dropout with Philox masks addressed by global coordinates (Note [Dropout RNG]): a row of
// the local tensor is a contiguous run of element indices, drawn four per Philox call.
// Kept elements are inp * (1.0f / (1.0f - p)), dropped ones +0; forward, apply and backward agree.
#include "runtime/kernels/cpu/dropout.h"

#include <cstring>

#include "runtime/error.h"
#include "runtime/kernels/cpu/vector_math.h"

namespace runtime::cpu {
namespace {

struct DropoutRule {
  DropoutKey key;
  uint32_t threshold;  // keep iff bits >= threshold
  float scale;         // 1 / (1 - p), computed once in float
};

DropoutRule make_rule(float p, DropoutKey key) {
  TRAINER_ASSERT(p >= 0.f && p < 1.f, "dropout probability " << p << " outside [0, 1)");
  return DropoutRule{key, dropout_threshold(p), 1.0f / (1.0f - p)};
}

inline void apply_bits(float* out, uint8_t* mask, const float* inp, int64_t i, uint32_t bits,
                       const DropoutRule& rule) {
  const bool keep = bits >= rule.threshold;
  mask[i] = keep ? 1 : 0;
  out[i] = keep ? inp[i] * rule.scale : 0.f;
}

// Philox4x32-10 on kBatchBlocks consecutive counters side by side: the same rounds as
// philox4x32_10 (runtime/philox.h) in structure-of-arrays form, so the compiler vectorizes
// across counters. bits[w][l] is word w of the block first_block + l. The tests compare it
// with dropout_bits element by element.
constexpr int kBatchBlocks = 16;

void philox_batch(uint32_t (&bits)[4][kBatchBlocks], uint64_t first_block, uint64_t sample,
                  DropoutKey key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t(&c0)[kBatchBlocks] = bits[0];
  uint32_t(&c1)[kBatchBlocks] = bits[1];
  uint32_t(&c2)[kBatchBlocks] = bits[2];
  uint32_t(&c3)[kBatchBlocks] = bits[3];
  for (int l = 0; l < kBatchBlocks; ++l) {
    const uint64_t block = first_block + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(block);
    c1[l] = static_cast<uint32_t>(block >> 32);
    c2[l] = static_cast<uint32_t>(sample);
    c3[l] = static_cast<uint32_t>(sample >> 32);
  }
  uint32_t key0 = key.key0, key1 = key.key1;
  for (int round = 0; round < 10; ++round) {
#pragma omp simd
    for (int l = 0; l < kBatchBlocks; ++l) {
      const uint64_t product0 = uint64_t{kMul0} * c0[l];
      const uint64_t product1 = uint64_t{kMul1} * c2[l];
      const uint32_t n0 = static_cast<uint32_t>(product1 >> 32) ^ c1[l] ^ key0;
      const uint32_t n2 = static_cast<uint32_t>(product0 >> 32) ^ c3[l] ^ key1;
      c1[l] = static_cast<uint32_t>(product1);
      c3[l] = static_cast<uint32_t>(product0);
      c0[l] = n0;
      c2[l] = n2;
    }
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
}

// Elements [0, n) of a row whose element indices are first_element + i, for one sample.
void dropout_row(float* out, uint8_t* mask, const float* inp, int64_t n, uint64_t first_element,
                 uint64_t sample, const DropoutRule& rule) {
  int64_t i = 0;
  for (; i < n && ((first_element + i) & 3) != 0; ++i)
    apply_bits(out, mask, inp, i, dropout_bits(rule.key, sample, first_element + i), rule);
  // Whole Philox blocks: one block gives the bits of four consecutive elements.
  uint32_t bits[4][kBatchBlocks], element_bits[4 * kBatchBlocks];
  for (; i + 4 * kBatchBlocks <= n; i += 4 * kBatchBlocks) {
    philox_batch(bits, (first_element + i) >> 2, sample, rule.key);
    for (int l = 0; l < kBatchBlocks; ++l)
      for (int lane = 0; lane < 4; ++lane) element_bits[4 * l + lane] = bits[lane][l];
#pragma omp simd
    for (int e = 0; e < 4 * kBatchBlocks; ++e)
      apply_bits(out + i, mask + i, inp + i, e, element_bits[e], rule);
  }
  for (; i + 4 <= n; i += 4) {
    const uint64_t block = (first_element + i) >> 2;
    const Philox4x32 counter{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                              static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32)}};
    const Philox4x32 block_bits = philox4x32_10(counter, rule.key.key0, rule.key.key1);
    for (int lane = 0; lane < 4; ++lane)
      apply_bits(out, mask, inp, i + lane, block_bits.v[lane], rule);
  }
  for (; i < n; ++i)
    apply_bits(out, mask, inp, i, dropout_bits(rule.key, sample, first_element + i), rule);
}

// p == 0: every element kept, out an exact copy of inp.
void keep_all(float* out, uint8_t* mask, const float* inp, int64_t n) {
  std::memset(mask, 1, static_cast<size_t>(n));
  if (out != inp) std::memmove(out, inp, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

void dropout_hidden_forward(float* out, uint8_t* mask, const float* inp, int64_t T, int64_t B,
                            int64_t C, int64_t t_offset, int64_t sample_offset, float p,
                            DropoutKey key) {
  const DropoutRule rule = make_rule(p, key);
  if (p == 0.f) return keep_all(out, mask, inp, T * B * C);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T * B; ++row) {
    const int64_t t = row / B, b = row % B;
    const int64_t offset = row * C;
    dropout_row(out + offset, mask + offset, inp + offset, C,
                static_cast<uint64_t>((t_offset + t) * C), static_cast<uint64_t>(sample_offset + b),
                rule);
  }
}

void dropout_attention_forward(float* out, uint8_t* mask, const float* inp, int64_t B, int64_t H,
                               int64_t T, int64_t head_offset, int64_t sample_offset, float p,
                               DropoutKey key) {
  const DropoutRule rule = make_rule(p, key);
  if (p == 0.f) return keep_all(out, mask, inp, B * H * T * T);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < B * H * T; ++row) {  // row = (b * H + h) * T + i
    const int64_t i = row % T, h = (row / T) % H, b = row / (T * H);
    const int64_t offset = row * T;
    dropout_row(out + offset, mask + offset, inp + offset, T,
                static_cast<uint64_t>(((head_offset + h) * T + i) * T),
                static_cast<uint64_t>(sample_offset + b), rule);
  }
}

void dropout_apply(float* out, const float* inp, const uint8_t* mask, int64_t n, float p) {
  const float scale = make_rule(p, DropoutKey{}).scale;
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) out[i] = mask[i] ? inp[i] * scale : 0.f;
}

void dropout_backward(float* dinp, const float* dout, const uint8_t* mask, int64_t n, float p) {
  const float scale = make_rule(p, DropoutKey{}).scale;
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) dinp[i] = mask[i] ? dout[i] * scale : 0.f;
}

}  // namespace runtime::cpu
