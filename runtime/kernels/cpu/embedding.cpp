// Token and position embeddings in [s, b, h] layout. Forward of the token table assigns (=),
// of the position table adds (+=); backward accumulates into the tables (+=). Backward
// splits the work by channel blocks and adds rows in token order, so it is deterministic.
#include "runtime/kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

namespace runtime::cpu {
namespace {

constexpr int64_t kChannelBlock = 64;  // channels per thread task in the backward passes

}  // namespace

void embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t rows, int64_t C,
                       int64_t vocab_start, int64_t vocab_rows) {
  const size_t row_bytes = static_cast<size_t>(C) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t local = static_cast<int64_t>(tokens[r]) - vocab_start;
    if (local >= 0 && local < vocab_rows) {
      std::memcpy(out + r * C, wte + local * C, row_bytes);
    } else {
      std::fill(out + r * C, out + (r + 1) * C, 0.f);
    }
  }
}

void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t rows,
                        int64_t C, int64_t vocab_start, int64_t vocab_rows) {
  // Repeated tokens add into the same table row: each channel block walks the rows in order.
  const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t c0 = block * kChannelBlock;
    const int64_t width = std::min(kChannelBlock, C - c0);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t local = static_cast<int64_t>(tokens[r]) - vocab_start;
      if (local < 0 || local >= vocab_rows) continue;
      float* dst = dwte + local * C + c0;
      const float* src = dout + r * C + c0;
      for (int64_t c = 0; c < width; ++c) dst[c] += src[c];
    }
  }
}

void position_embedding_forward(float* out, const float* wpe, int64_t T, int64_t B, int64_t C,
                                int64_t t_offset, const int32_t* document_starts) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < T * B; ++row) {
    const int64_t start = document_starts == nullptr ? 0 : document_starts[row];
    const float* pos = wpe + (t_offset + row / B - start) * C;
    float* dst = out + row * C;
    for (int64_t c = 0; c < C; ++c) dst[c] += pos[c];
  }
}

void position_embedding_backward(float* dwpe, const float* dout, int64_t T, int64_t B, int64_t C,
                                 int64_t t_offset, const int32_t* document_starts) {
  if (document_starts == nullptr) {
    // Each position's row of dwpe belongs to one thread; samples are added in order b = 0..B-1.
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      float* dst = dwpe + (t_offset + t) * C;
      for (int64_t b = 0; b < B; ++b) {
        const float* src = dout + (t * B + b) * C;
        for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
      }
    }
    return;
  }
  // Rows of several documents add into one position: each thread owns a block of the channels
  // and adds every row into it in the order b, then t (Note [Document positions]).
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < C; c0 += kChannelBlock) {
    const int64_t width = std::min(kChannelBlock, C - c0);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T; ++t) {
        float* dst = dwpe + (t_offset + t - document_starts[t * B + b]) * C + c0;
        const float* src = dout + (t * B + b) * C + c0;
        for (int64_t c = 0; c < width; ++c) dst[c] += src[c];
      }
    }
  }
}

}  // namespace runtime::cpu
