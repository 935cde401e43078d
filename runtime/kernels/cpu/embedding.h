// Token and position embeddings in [s, b, h] layout. Token ids are (T, B).
// The token table may be a vocab shard: rows [vocab_start, vocab_start + vocab_rows);
// ids outside it produce zeros (vocab-parallel embedding sums shards afterwards).
// Backward accumulates into the tables (+=).
#pragma once

#include <cstdint>

namespace runtime::cpu {

// out(T*B, C) = wte[id - vocab_start] or 0 when the id is outside the shard (=).
void embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t rows, int64_t C,
                       int64_t vocab_start, int64_t vocab_rows);
// dwte[id - vocab_start] += dout row, for ids inside the shard.
void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t rows,
                        int64_t C, int64_t vocab_start, int64_t vocab_rows);

// out(T, B, C) += wpe[p(t, b)], p(t, b) = t_offset + t - document_starts[t * B + b] (the last
// term 0 when document_starts is null: Note [Document positions] in runtime/op_args.h).
void position_embedding_forward(float* out, const float* wpe, int64_t T, int64_t B, int64_t C,
                                int64_t t_offset, const int32_t* document_starts = nullptr);
// dwpe[p(t, b)] += dout(t, b, :), added sample by sample, row by row within a sample.
void position_embedding_backward(float* dwpe, const float* dout, int64_t T, int64_t B, int64_t C,
                                 int64_t t_offset, const int32_t* document_starts = nullptr);

}  // namespace runtime::cpu
