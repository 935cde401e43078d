// The rotary frequencies (runtime/rotary.h). Compiled with -ffp-contract=off: every product and
// sum below rounds to f32 on its own, as the f32 tensor operations it follows do (a fused
// multiply-add would round once).
#include "runtime/rotary.h"

#include <algorithm>
#include <cmath>

namespace runtime {

// Note [Rope scaling rounding]
// Hugging Face scales in f32 tensor arithmetic, where a Python number meets an f32 tensor as an
// f32 and `number / tensor` is the tensor's reciprocal times the number: the wavelength is
// fl(fl(1 / inv_freq) * fl(2 pi)); the bounds original / low_freq_factor and original /
// high_freq_factor are Python doubles, compared as f32; the blend is f32 operations in its
// order. The frequencies here repeat those operations, so they are Hugging Face's bits
// (RopeScaling tests in tests/unit/kernels/test_rope.cpp compare with values PyTorch computed).
namespace {

// YaRN's frequency (Note [Rotary frequencies]): Hugging Face's _compute_yarn_parameters in its
// f32 tensor operations; the correction range in double, as Python computes it.
float yarn_inv_freq(int64_t pair, int64_t head_dim, float base, float power,
                    const RopeScaling& scaling) {
  const double dim = static_cast<double>(head_dim);
  auto correction_dim = [&](double rotations) {
    return dim *
           std::log(static_cast<double>(scaling.original_max_position_embeddings) /
                    (rotations * 2.0 * M_PI)) /
           (2.0 * std::log(static_cast<double>(base)));
  };
  const double low = std::max(std::floor(correction_dim(scaling.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(scaling.beta_slow)), dim - 1.0);
  if (low == high) high += 0.001;
  float ramp =
      (static_cast<float>(pair) - static_cast<float>(low)) / static_cast<float>(high - low);
  ramp = std::min(std::max(ramp, 0.f), 1.f);
  const float extrapolation = 1.f - ramp;  // the plain frequency's share
  const float interpolated = 1.f / (scaling.factor * power);
  return interpolated * (1.f - extrapolation) + (1.f / power) * extrapolation;
}

}  // namespace

float RopeScaling::score_factor() const {
  if (type != RopeScalingType::yarn || factor <= 1.f) return 1.f;
  const auto attention = static_cast<float>(0.1 * std::log(static_cast<double>(factor)) + 1.0);
  return attention * attention;
}

float rotary_inv_freq(int64_t pair, int64_t head_dim, float base, const RopeScaling& scaling) {
  const float exponent = static_cast<float>(2 * pair) / static_cast<float>(head_dim);
  const float power =
      static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  const float inv_freq = 1.f / power;
  if (!scaling.enabled()) return inv_freq;
  if (scaling.type == RopeScalingType::yarn)
    return yarn_inv_freq(pair, head_dim, base, power, scaling);
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
