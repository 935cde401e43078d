// Small vector kernels used around the layers and the optimizer.
#pragma once

#include <cstdint>

#include "runtime/philox.h"

namespace runtime::cpu {

// out = a + b (=); out may alias a or b.
void add(float* out, const float* a, const float* b, int64_t n);
// x *= s
void scale_inplace(float* x, float s, int64_t n);
// out(init.rows, init.cols) = the shard's initial values (Note [Parameter init RNG]).
void init_param(float* out, const ParamInit& init);
// Sum of squares in double precision, in a fixed order (deterministic).
double sum_squares(const float* x, int64_t n);

}  // namespace runtime::cpu
