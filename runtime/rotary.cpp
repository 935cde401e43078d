// The rotary frequencies (runtime/rotary.h). Compiled with -ffp-contract=off: every product and
// sum below rounds to f32 on its own, as the f32 tensor operations it follows do (a fused
// multiply-add would round once).
#include "runtime/rotary.h"

#include <cmath>

namespace runtime {

// Note [Rope scaling rounding]
// Hugging Face scales in f32 tensor arithmetic, where a Python number meets an f32 tensor as an
// f32 and `number / tensor` is the tensor's reciprocal times the number: the wavelength is
// fl(fl(1 / inv_freq) * fl(2 pi)); the bounds original / low_freq_factor and original /
// high_freq_factor are Python doubles, compared as f32; the blend is f32 operations in its
// order. The frequencies here repeat those operations, so they are Hugging Face's bits
// (RopeScaling tests in tests/unit/kernels/test_rope.cpp compare with values PyTorch computed).
float rotary_inv_freq(int64_t pair, int64_t head_dim, float base, const RopeScaling& scaling) {
  const float exponent = static_cast<float>(2 * pair) / static_cast<float>(head_dim);
  const float power =
      static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  const float inv_freq = 1.f / power;
  if (!scaling.enabled()) return inv_freq;
  const double original = static_cast<double>(scaling.original_max_position_embeddings);
  const float wavelength = (1.f / inv_freq) * static_cast<float>(2.0 * M_PI);
  if (wavelength > static_cast<float>(original / scaling.low_freq_factor))
    return inv_freq / scaling.factor;
  if (wavelength < static_cast<float>(original / scaling.high_freq_factor)) return inv_freq;
  const float smooth =
      ((1.f / wavelength) * static_cast<float>(original) - scaling.low_freq_factor) /
      static_cast<float>(static_cast<double>(scaling.high_freq_factor) -
                         static_cast<double>(scaling.low_freq_factor));
  return (1.f - smooth) * inv_freq / scaling.factor + smooth * inv_freq;
}

}  // namespace runtime
