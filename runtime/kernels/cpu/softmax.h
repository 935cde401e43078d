// Causal softmax over attention scores (batch_heads, T, T): row i attends to
// columns j <= i; entries j > i are written as exactly 0. Scaling by 1/sqrt(head
// dim) happens in the score GEMM, not here.
#pragma once

#include <cstdint>

namespace runtime::cpu {

// probs = causal_softmax(scores); probs may alias scores (in place).
void causal_softmax_forward(float* probs, const float* scores, int64_t batch_heads, int64_t T);

// dscores = probs * (dprobs - rowsum(dprobs * probs)) on j <= i, 0 above the diagonal (=).
// dscores may alias dprobs.
void causal_softmax_backward(float* dscores, const float* dprobs, const float* probs,
                             int64_t batch_heads, int64_t T);

}  // namespace runtime::cpu
