// GELU activation: the tanh approximation (Megatron/GPT-2 default, HF "gelu_new")
// or the exact erf form (HF "gelu").
#pragma once

#include <cstdint>

#include "runtime/op_types.h"

namespace runtime::cpu {

using runtime::GeluKind;

// out = gelu(inp) (=); out may alias inp.
void gelu_forward(float* out, const float* inp, int64_t n, GeluKind kind);
// dinp = dout * gelu'(inp) (=); dinp may alias dout.
void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n, GeluKind kind);

}  // namespace runtime::cpu
