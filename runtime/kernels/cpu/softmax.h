// Causal softmax over attention scores (batch_heads, T, T): row i attends to columns j <= i
// (with a sliding window of W > 0, to i - W < j <= i: Note [Sliding window] in
// runtime/op_args.h); every other entry is written as exactly 0. Scaling by 1/sqrt(head dim)
// happens in the score GEMM, not here.
#pragma once

#include <cstdint>

namespace runtime::cpu {

// probs = causal_softmax(scores) over the window (0: no window); probs may alias scores.
void causal_softmax_forward(float* probs, const float* scores, int64_t batch_heads, int64_t T,
                            int64_t window);

// dscores = probs * (dprobs - rowsum(dprobs * probs)) on the visible columns, 0 elsewhere (=).
// dscores may alias dprobs.
void causal_softmax_backward(float* dscores, const float* dprobs, const float* probs,
                             int64_t batch_heads, int64_t T, int64_t window);

}  // namespace runtime::cpu
