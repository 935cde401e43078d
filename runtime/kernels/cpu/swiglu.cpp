// SwiGLU forward (=) and backward (=), elementwise over (row, j) with the vectorizable exp of
// vector_math.h. Each element is computed by the same code in every call, so results do not
// depend on threads or on how the rows are split.
#include "runtime/kernels/cpu/swiglu.h"

#include "runtime/kernels/cpu/vector_math.h"

namespace runtime::cpu {
namespace {

// 1 / (1 + e^-g): 0 below about -88 (e^88.3 caps the exponential), 1 above about 17.
inline float sigmoid(float g) {
  return 1.f / (1.f + detail::exp_poly(-g));
}

}  // namespace

void swiglu_forward(float* out, const float* inp, int64_t rows, int64_t ffn) {
#pragma omp parallel for schedule(static) if (rows * ffn >= detail::kMinParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = inp + r * 2 * ffn;
    const float* up = gate + ffn;
    float* y = out + r * ffn;
#pragma omp simd
    for (int64_t j = 0; j < ffn; ++j) y[j] = gate[j] * sigmoid(gate[j]) * up[j];
  }
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, int64_t rows, int64_t ffn) {
  // silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))).
#pragma omp parallel for schedule(static) if (rows * ffn >= detail::kMinParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = inp + r * 2 * ffn;
    const float* up = gate + ffn;
    const float* dy = dout + r * ffn;
    float* dgate = dinp + r * 2 * ffn;
    float* dup = dgate + ffn;
#pragma omp simd
    for (int64_t j = 0; j < ffn; ++j) {
      const float g = gate[j], u = up[j], sig = sigmoid(g);
      dgate[j] = dy[j] * u * (sig * (1.f + g * (1.f - sig)));
      dup[j] = dy[j] * (g * sig);
    }
  }
}

}  // namespace runtime::cpu
