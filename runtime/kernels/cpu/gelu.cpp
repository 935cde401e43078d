// GELU forward (=) and backward (=), elementwise. The tanh form uses a vectorizable
// tanh (vector_math.h); the erf form uses libm's erff. Each element is computed by the
// same code in every call, so results do not depend on threads or on how n is split.
#include "runtime/kernels/cpu/gelu.h"

#include <cmath>

#include "runtime/kernels/cpu/vector_math.h"

namespace runtime::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;    // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1 / sqrt(2 pi)

}  // namespace

void gelu_forward(float* out, const float* inp, int64_t n, GeluKind kind) {
  if (kind == GeluKind::tanh) {
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElements)
    for (int64_t i = 0; i < n; ++i) {
      const float x = inp[i];
      const float t = detail::tanh_poly(kSqrt2OverPi * (x + kCubic * x * x * x));
      out[i] = 0.5f * x * (1.f + t);
    }
  } else {
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElements)
    for (int64_t i = 0; i < n; ++i) {
      const float x = inp[i];
      out[i] = 0.5f * x * (1.f + std::erf(x * kInvSqrt2));
    }
  }
}

void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n, GeluKind kind) {
  if (kind == GeluKind::tanh) {
    // d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElements)
    for (int64_t i = 0; i < n; ++i) {
      const float x = inp[i];
      const float t = detail::tanh_poly(kSqrt2OverPi * (x + kCubic * x * x * x));
      const float du_dx = kSqrt2OverPi * (1.f + 3.f * kCubic * x * x);
      const float grad = 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * du_dx;
      dinp[i] = dout[i] * grad;
    }
  } else {
    // d/dx = Phi(x) + x phi(x)
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElements)
    for (int64_t i = 0; i < n; ++i) {
      const float x = inp[i];
      const float cdf = 0.5f * (1.f + std::erf(x * kInvSqrt2));
      const float pdf = kInvSqrt2Pi * std::exp(-0.5f * x * x);
      dinp[i] = dout[i] * (cdf + x * pdf);
    }
  }
}

}  // namespace runtime::cpu
