// The rotary embedding's frequencies and angles (Note [Rotary layout] in runtime/op_args.h),
// header-only; the angle is host/device-callable, so that the CPU and CUDA kernels rotate by the
// very same f32 angles.
#pragma once

#include <math.h>

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
// and sin are the accurate f32 functions of that angle (no fast math).
inline float rotary_inv_freq(int64_t pair, int64_t head_dim, float base) {
  const float exponent = static_cast<float>(2 * pair) / static_cast<float>(head_dim);
  const float power =
      static_cast<float>(pow(static_cast<double>(base), static_cast<double>(exponent)));
  return 1.f / power;
}

// The f32 angle of frequency inv_freq at `position`.
TRAINER_HOST_DEVICE inline float rotary_angle(int64_t position, float inv_freq) {
  return static_cast<float>(position) * inv_freq;
}

}  // namespace runtime
