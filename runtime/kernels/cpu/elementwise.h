// Small vector kernels used around the layers and the optimizer.
#pragma once

#include <cstdint>

namespace runtime::cpu {

// out = a + b (=); out may alias a or b.
void add(float* out, const float* a, const float* b, int64_t n);
// x *= s
void scale_inplace(float* x, float s, int64_t n);
// Sum of squares in double precision, in a fixed order (deterministic).
double sum_squares(const float* x, int64_t n);

}  // namespace runtime::cpu
