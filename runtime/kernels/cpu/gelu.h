// GELU activation: the tanh approximation (Megatron/GPT-2 default, HF "gelu_new")
// or the exact erf form (HF "gelu").
#pragma once

#include <cstdint>

namespace runtime::cpu {

enum class GeluKind { tanh, erf };

// out = gelu(inp) (=); out may alias inp.
void gelu_forward(float* out, const float* inp, int64_t n, GeluKind kind);
// dinp = dout * gelu'(inp) (=); dinp may alias dout.
void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n, GeluKind kind);

}  // namespace runtime::cpu
