#include "runtime/kernels/cpu/convert.h"

namespace runtime::cpu {

void convert(uint16_t* out, const float* inp, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(inp[i]);
}

void convert(float* out, const uint16_t* inp, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(inp[i]);
}

}  // namespace runtime::cpu
