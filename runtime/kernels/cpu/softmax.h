// Causal softmax over attention scores (batch_heads, T, T): row i attends to columns j <= i
// (with a sliding window of W > 0, to i - W < j <= i: Note [Sliding window] in
// runtime/op_args.h; with documents, to j at or after its document's start: Note [Document
// masking]); every other entry is written as exactly 0. Scaling by 1/sqrt(head dim)
// happens in the score GEMM, not here.
#pragma once

#include <cstdint>

namespace runtime::cpu {

// What a row sees besides the causal mask.
struct SoftmaxMask {
  int64_t window = 0;                        // 0: no window
  const int32_t* document_starts = nullptr;  // (T, micro_batch), or null: one document
  int64_t micro_batch = 1;
  int64_t heads_per_sample = 1;  // batch_heads / micro_batch
};

// probs = causal_softmax(scores) over the visible columns; probs may alias scores.
void causal_softmax_forward(float* probs, const float* scores, int64_t batch_heads, int64_t T,
                            const SoftmaxMask& mask);

// dscores = probs * (dprobs - rowsum(dprobs * probs)) on the visible columns, 0 elsewhere (=).
// dscores may alias dprobs.
void causal_softmax_backward(float* dscores, const float* dprobs, const float* probs,
                             int64_t batch_heads, int64_t T, const SoftmaxMask& mask);

}  // namespace runtime::cpu
