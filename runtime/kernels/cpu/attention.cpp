// Core attention on the host: head split/merge copies and the four batched products,
// computed by one register-tiled kernel (OpenMP over heads) that skips the causal zeros.
// Deterministic: every output element is summed by one thread, over k in increasing order; a
// kv head's dk and dv by one thread over its query heads in increasing order.
#include "runtime/kernels/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/error.h"
#include "runtime/kernels/cpu/register_tile.h"

namespace runtime::cpu {
namespace {

// Note [Attention products]
// Per head, T is often 64..256, where one cblas_sgemm call per head costs more than
// the product itself and OpenBLAS runs such sizes on one thread (measured on 2 cores at
// B=4, H=12, T=64, D=64: scores 306 us with cblas per head, 119 us here). Instead each head is
// handled by one OpenMP thread with a small kernel: C(i, n) = alpha * sum_k A(i, k) B(k, n),
// B read by rows (vectorized along n), A read as scalars through (row, k) strides so that
// transposed operands (dscores^T, probs^T) need no copy. The causal structure bounds the
// k range of each block of kTileRows rows: probs and dscores are exactly 0 above the
// diagonal, so leaving out those terms changes no value. Only k^T and v^T are copied
// into a per-thread scratch so that the q k^T and dctx v^T products read B by rows.

using detail::kVectorFloats;
using detail::register_tile;
using Operands = detail::TileProduct;  // C = alpha A B, or C += when accumulate (the later
                                       // query heads of a kv head's gradient)

constexpr int kTileRows = 6;     // rows of C per register tile
constexpr int kTileVectors = 2;  // vectors per tile row
constexpr int64_t kTileCols = kTileVectors * kVectorFloats;

// register_tile's product for a column tail of `cols` < kVectorFloats columns, in scalar code.
template <int Rows>
inline void tile_tail(const Operands& op, int64_t i0, int64_t n0, int64_t cols, int64_t k0,
                      int64_t k1) {
  float acc[Rows][kVectorFloats] = {};
  const float* a = op.a + i0 * op.a_row;
  for (int64_t k = k0; k < k1; ++k) {
    const float* b_row = op.b + k * op.ldb + n0;
    const float* a_k = a + k * op.a_k;
    for (int r = 0; r < Rows; ++r) {
      const float a_value = a_k[r * op.a_row];
      for (int64_t n = 0; n < cols; ++n) acc[r][n] += a_value * b_row[n];
    }
  }
  for (int r = 0; r < Rows; ++r) {
    float* c_row = op.c + (i0 + r) * op.ldc + n0;
    for (int64_t n = 0; n < cols; ++n)
      c_row[n] = op.accumulate ? c_row[n] + op.alpha * acc[r][n] : op.alpha * acc[r][n];
  }
}

template <int Rows>
void row_block(const Operands& op, int64_t i0, int64_t n_end, int64_t k0, int64_t k1) {
  int64_t n0 = 0;
  for (; n0 + kTileCols <= n_end; n0 += kTileCols)
    register_tile<Rows, kTileVectors>(op, i0, n0, k0, k1);
  for (; n0 + kVectorFloats <= n_end; n0 += kVectorFloats)
    register_tile<Rows, 1>(op, i0, n0, k0, k1);
  if (n0 < n_end) tile_tail<Rows>(op, i0, n0, n_end - n0, k0, k1);
}

// Rows [i0, i0 + rows) of C, columns [0, n_end), summing k over [k0, k1).
void rows_product(const Operands& op, int64_t i0, int64_t rows, int64_t n_end, int64_t k0,
                  int64_t k1) {
  switch (rows) {
    case 6:
      row_block<6>(op, i0, n_end, k0, k1);
      break;
    case 5:
      row_block<5>(op, i0, n_end, k0, k1);
      break;
    case 4:
      row_block<4>(op, i0, n_end, k0, k1);
      break;
    case 3:
      row_block<3>(op, i0, n_end, k0, k1);
      break;
    case 2:
      row_block<2>(op, i0, n_end, k0, k1);
      break;
    default:
      row_block<1>(op, i0, n_end, k0, k1);
      break;
  }
}
static_assert(kTileRows == 6, "rows_product dispatches on 1..6 rows");

// Which part of an M-row product a block of rows needs, given the causal structure.
enum class Causal {
  lower_columns,  // row i needs columns j <= i (q k^T, dctx v^T); k spans [0, K). Columns
                  // are rounded up to whole tiles: a few entries above the diagonal get values
  lower_k,        // row i sums k <= i only (A is 0 for k > i: dscores k, probs v)
  upper_k,        // row i sums k >= i only (A^T is 0 for k < i: dscores^T q, probs^T dctx)
};

// C(M, N) = alpha * A B with the causal bounds of `causal`; K is the full reduction length.
void causal_product(const Operands& op, int64_t M, int64_t N, int64_t K, Causal causal) {
  for (int64_t i0 = 0; i0 < M; i0 += kTileRows) {
    const int64_t rows = std::min<int64_t>(kTileRows, M - i0);
    const int64_t block_end = i0 + rows;  // one past the block's last row
    switch (causal) {
      case Causal::lower_columns: {
        const int64_t whole_tiles = (block_end + kTileCols - 1) / kTileCols * kTileCols;
        rows_product(op, i0, rows, std::min(N, whole_tiles), 0, K);
        break;
      }
      case Causal::lower_k:
        rows_product(op, i0, rows, N, 0, std::min(K, block_end));
        break;
      case Causal::upper_k:
        rows_product(op, i0, rows, N, i0, K);
        break;
    }
  }
}

// dst(cols, rows) = src(rows, cols)^T, in square blocks so that both sides are read and
// written a cache line at a time.
void transpose(float* dst, const float* src, int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 8;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const int64_t r1 = std::min(rows, r0 + kBlock);
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t c1 = std::min(cols, c0 + kBlock);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * cols + c];
    }
  }
}

// Per-thread scratch for one head's transposed operand (T * D floats), kept between calls.
float* thread_scratch(int64_t floats) {
  thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < floats) scratch.resize(static_cast<size_t>(floats));
  return scratch.data();
}

// Query heads per kv head r, checked: r >= 1 divides `heads` (H, or BH for the products).
int64_t checked_group(int64_t heads, int64_t group_size, const char* op) {
  TRAINER_ASSERT(group_size >= 1 && heads % group_size == 0,
                 op << ": group_size " << group_size << " must divide " << heads << " heads");
  return group_size;
}

}  // namespace

void split_qkv_heads(float* q, float* k, float* v, const float* qkv, int64_t T, int64_t B,
                     int64_t H, int64_t D, int64_t group_size) {
  const int64_t r = checked_group(H, group_size, "split_qkv_heads"), G = H / r;
  const int64_t width = (r + 2) * D;  // features of one group
  const size_t head_bytes = static_cast<size_t>(D) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t b = bh / H, g = bh % H / r, member = bh % r, kv_head = bh / r;
    for (int64_t t = 0; t < T; ++t) {
      const float* group = qkv + ((t * B + b) * G + g) * width;
      std::memcpy(q + (bh * T + t) * D, group + member * D, head_bytes);
      if (member != 0) continue;  // the group's first query head copies its k and v
      const int64_t dst = (kv_head * T + t) * D;
      std::memcpy(k + dst, group + r * D, head_bytes);
      std::memcpy(v + dst, group + (r + 1) * D, head_bytes);
    }
  }
}

void merge_qkv_heads(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t T,
                     int64_t B, int64_t H, int64_t D, int64_t group_size) {
  const int64_t r = checked_group(H, group_size, "merge_qkv_heads"), G = H / r;
  const int64_t width = (r + 2) * D;
  const size_t head_bytes = static_cast<size_t>(D) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t g = 0; g < G; ++g) {
        float* dst = dqkv + ((t * B + b) * G + g) * width;
        for (int64_t member = 0; member < r; ++member)
          std::memcpy(dst + member * D, dq + ((b * H + g * r + member) * T + t) * D, head_bytes);
        const int64_t src = ((b * G + g) * T + t) * D;
        std::memcpy(dst + r * D, dk + src, head_bytes);
        std::memcpy(dst + (r + 1) * D, dv + src, head_bytes);
      }
    }
  }
}

void merge_heads(float* ctx, const float* ctx_heads, int64_t T, int64_t B, int64_t H, int64_t D) {
  const size_t head_bytes = static_cast<size_t>(D) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(ctx + ((t * B + b) * H + h) * D, ctx_heads + ((b * H + h) * T + t) * D,
                    head_bytes);
}

void split_heads(float* ctx_heads, const float* ctx, int64_t T, int64_t B, int64_t H, int64_t D) {
  const size_t head_bytes = static_cast<size_t>(D) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(ctx_heads + (bh * T + t) * D, ctx + ((t * B + b) * H + h) * D, head_bytes);
  }
}

// One task per kv head (its k^T once, then its query heads' scores) when there are enough of them
// to fill the team; else one per query head, each with its own copy of k^T.
void attention_scores_forward(float* scores, const float* q, const float* k, int64_t BH, int64_t T,
                              int64_t D, float scale, int64_t group_size) {
  const int64_t r = checked_group(BH, group_size, "attention_scores_forward");
  const int64_t heads_per_task = BH / r >= omp_get_max_threads() ? r : 1;
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < BH / heads_per_task; ++task) {
    const int64_t first_head = task * heads_per_task;
    float* k_t = thread_scratch(T * D);  // (D, T)
    transpose(k_t, k + first_head / r * T * D, T, D);
    for (int64_t bh = first_head; bh < first_head + heads_per_task; ++bh) {
      const Operands op{q + bh * T * D, D, 1, k_t, T, scores + bh * T * T, T, scale};
      causal_product(op, T, T, D, Causal::lower_columns);
    }
  }
}

// One task per kv head: its query heads' dq in turn, and its dk summed over them in order.
void attention_scores_backward(float* dq, float* dk, const float* dscores, const float* q,
                               const float* k, int64_t BH, int64_t T, int64_t D, float scale,
                               int64_t group_size) {
  const int64_t r = checked_group(BH, group_size, "attention_scores_backward");
#pragma omp parallel for schedule(static)
  for (int64_t kv_head = 0; kv_head < BH / r; ++kv_head) {
    for (int64_t member = 0; member < r; ++member) {
      const int64_t bh = kv_head * r + member;
      const float* ds = dscores + bh * T * T;
      // dq(T, D) = scale * dscores k; row i sums j <= i.
      const Operands dq_op{ds, T, 1, k + kv_head * T * D, D, dq + bh * T * D, D, scale};
      causal_product(dq_op, T, D, T, Causal::lower_k);
      // dk(T, D) (+)= scale * dscores^T q; row j sums i >= j.
      const Operands dk_op{ds, 1, T, q + bh * T * D, D, dk + kv_head * T * D, D, scale, member > 0};
      causal_product(dk_op, T, D, T, Causal::upper_k);
    }
  }
}

void attention_context_forward(float* ctx_heads, const float* probs, const float* v, int64_t BH,
                               int64_t T, int64_t D, int64_t group_size) {
  const int64_t r = checked_group(BH, group_size, "attention_context_forward");
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < BH; ++bh) {
    const float* v_head = v + bh / r * T * D;
    const Operands op{probs + bh * T * T, T, 1, v_head, D, ctx_heads + bh * T * D, D, 1.f};
    causal_product(op, T, D, T, Causal::lower_k);
  }
}

// One task per kv head, as attention_scores_backward.
void attention_context_backward(float* dprobs, float* dv, const float* dctx_heads,
                                const float* probs, const float* v, int64_t BH, int64_t T,
                                int64_t D, int64_t group_size) {
  const int64_t r = checked_group(BH, group_size, "attention_context_backward");
#pragma omp parallel for schedule(static)
  for (int64_t kv_head = 0; kv_head < BH / r; ++kv_head) {
    float* v_t = thread_scratch(T * D);  // (D, T)
    transpose(v_t, v + kv_head * T * D, T, D);
    for (int64_t member = 0; member < r; ++member) {
      const int64_t bh = kv_head * r + member;
      const float* dctx = dctx_heads + bh * T * D;
      float* dp = dprobs + bh * T * T;
      // dprobs(T, T) = dctx v^T on j <= i, then 0 above the diagonal.
      const Operands dp_op{dctx, D, 1, v_t, T, dp, T, 1.f};
      causal_product(dp_op, T, T, D, Causal::lower_columns);
      for (int64_t i = 0; i < T; ++i) std::fill(dp + i * T + i + 1, dp + (i + 1) * T, 0.f);
      // dv(T, D) (+)= probs^T dctx; row j sums i >= j.
      const Operands dv_op{probs + bh * T * T,   1, T,   dctx,      D,
                           dv + kv_head * T * D, D, 1.f, member > 0};
      causal_product(dv_op, T, D, T, Causal::upper_k);
    }
  }
}

}  // namespace runtime::cpu
