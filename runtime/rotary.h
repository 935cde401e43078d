// The rotary embedding's frequencies (computed on the host, runtime/rotary.cpp) and angles
// (Note [Rotary layout] in runtime/op_args.h); the angle is host/device-callable, so that the
// CPU and CUDA kernels rotate by the very same f32 angles.
#pragma once

#include <cstdint>

#if !defined(TRAINER_HOST_DEVICE)
#if defined(__CUDACC__)
#define TRAINER_HOST_DEVICE __host__ __device__
#else
#define TRAINER_HOST_DEVICE
#endif
#endif

namespace runtime {

// Note [Rotary frequencies]
// Hugging Face computes inv_freq_i = 1 / (base ** (arange(0, D, 2) / D)) in f32: the exponent
// 2i/D rounded to f32, the power, its reciprocal in f32. Here the exponent and the reciprocal
// are the same IEEE f32 operations, and the power is taken in double and rounded to f32 once
// (the correctly rounded f32 power but in vanishingly rare cases). The frequencies are computed
// on the host only, by rotary_inv_freq (the CUDA kernel takes them as an argument), because one
// ulp of a frequency matters (6e-8 in [0.5, 1), which at position 100000 moves the angle by
// 6e-3 rad) and f32 pow differs by an ulp between libm and CUDA. The angle is then position *
// inv_freq_i, one f32 product on every device (positions are exact in f32 below 2^24), and cos
// and sin are the accurate f32 functions of that angle (no fast math). PyTorch's own f32 pow is
// not correctly rounded everywhere: for base 1e6 and head_dim 128 it is one ulp low at pair 37,
// where Hugging Face's frequency on the CPU is one ulp off the one here.

// Llama 3.1's frequency scaling (Hugging Face rope_type "llama3"; factor 0: none): a frequency
// whose wavelength 2 pi / inv_freq is over original_max_position_embeddings / low_freq_factor
// is divided by `factor`, one under original_max_position_embeddings / high_freq_factor is
// kept, and one between is blended: (1 - s) inv_freq / factor + s inv_freq with s =
// (original_max_position_embeddings / wavelength - low_freq_factor) / (high_freq_factor -
// low_freq_factor).
//
// YaRN (Hugging Face rope_type "yarn", Qwen's long-context setting): the frequencies of pair i
// blend the plain one (extrapolation) and the plain one divided by `factor` (interpolation)
// with a ramp over the pairs between low = floor(d(beta_fast)) and high = ceil(d(beta_slow)),
// d(r) = D ln(original_max_position_embeddings / (2 pi r)) / (2 ln base) clamped to [0, D - 1]:
// pairs up to low keep the plain frequency, pairs from high on are interpolated; and cos and
// sin are multiplied by the attention factor 0.1 ln(factor) + 1, which multiplies every score
// q.k by its square (the trainer folds that into the softmax scale).
enum class RopeScalingType { llama3, yarn };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::llama3;
  float factor = 0.f;
  float low_freq_factor = 1.f;   // llama3
  float high_freq_factor = 4.f;  // llama3
  int64_t original_max_position_embeddings = 8192;
  float beta_fast = 32.f;  // yarn
  float beta_slow = 1.f;   // yarn

  bool enabled() const { return factor != 0.f; }
  // What the scores q.k are multiplied by: YaRN's attention factor squared, else 1.
  float score_factor() const;
};

// Frequency `pair` (0 .. head_dim / 2 - 1) of a head of `head_dim` under `base`, scaled by
// `scaling` (runtime/rotary.cpp; host only).
float rotary_inv_freq(int64_t pair, int64_t head_dim, float base, const RopeScaling& scaling = {});

// The f32 angle of frequency inv_freq at `position`.
TRAINER_HOST_DEVICE inline float rotary_angle(int64_t position, float inv_freq) {
  return static_cast<float>(position) * inv_freq;
}

}  // namespace runtime
