// Softmax cross entropy over vocabulary logits (rows, padded_vocab). Only the
// first `vocab` columns are real tokens; padded columns take no part in the
// softmax and get zero gradient, so exporting without the padding is exact.
#pragma once

#include <cstdint>

namespace runtime::cpu {

// losses(rows) = logsumexp(logits[:vocab]) - logits[target]; lse(rows) keeps logsumexp. A target
// of kIgnoredTarget (runtime/op_types.h) gives loss 0 and, in backward, a zero row.
void cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                           int64_t rows, int64_t vocab, int64_t padded_vocab);

// dlogits = (softmax(logits) - onehot(target)) * scale on real columns, 0 on padding (=).
// dlogits may alias logits.
void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                            const int32_t* targets, int64_t rows, int64_t vocab,
                            int64_t padded_vocab, float scale);

}  // namespace runtime::cpu
