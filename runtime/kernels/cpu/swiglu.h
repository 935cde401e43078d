// SwiGLU, the gated activation of Llama's MLP: each input row holds [gate | up], `ffn` wide
// each; out = silu(gate) * up with silu(g) = g / (1 + e^-g). Forward assigns out (=), backward
// assigns dinp (=): dgate then dup, in the input's layout.
#pragma once

#include <cstdint>

namespace runtime::cpu {

// out(r, j) = silu(inp(r, j)) * inp(r, ffn + j); out: (rows, ffn), inp: (rows, 2 * ffn).
void swiglu_forward(float* out, const float* inp, int64_t rows, int64_t ffn);

// dinp(r, j) = dout * up * silu'(gate), dinp(r, ffn + j) = dout * silu(gate); dinp may alias
// inp (each element pair is read before it is written).
void swiglu_backward(float* dinp, const float* dout, const float* inp, int64_t rows, int64_t ffn);

}  // namespace runtime::cpu
