// The block operators of ring attention on the host (Note [Flash blocks]): the flash tiles of
// flash_attention.cpp over a query block of qkv and a key block of kv, the log-sum-exp merge,
// and the layout copies around them. Deterministic: every output element has one writer.
#include "runtime/kernels/cpu/flash_block.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/error.h"
#include "runtime/kernels/cpu/flash_attention_tiles.h"

namespace runtime::cpu {

// Note [Flash blocks]
// Context parallelism splits the sequence into chunks; a rank's queries meet the keys of
// every chunk at or before them, one (query block, key block) pair at a time. A block is the
// flash kernel with the keys read from their own tensor kv (k and v of each head side by side)
// and both blocks placed in the unsharded sequence: key j is masked for query i iff
// kv_position + j > q_position + i, and the dropout bits of (head h, query i, key j) are
// element ((head_offset + h) * full_len + q_position + i) * full_len + kv_position + j, the
// bits the whole sequence draws for that pair (Note [Dropout RNG]). So the blocks of a query
// chunk hold exactly the terms of its whole attention:
//   forward: each block's softmax is over its own keys (ctx_b, lse_b); merging blocks by
//   lse = logaddexp(lse_1, lse_2), ctx = exp(lse_1 - lse) ctx_1 + exp(lse_2 - lse) ctx_2 gives
//   the softmax over the union, dropout included (dropout scales P after normalisation, which
//   the weights exp(lse_b - lse) only rescale).
//   backward: with the merged O and lse, P = exp(S - lse) is the whole softmax's probability
//   and Delta = rowsum(dO * O) its row term, so each block's dQ, dK, dV are that block's
//   share of FlashAttention-2's sums; adding them (dq over key blocks, dk and dv over query
//   blocks) gives the whole gradient up to the order of the additions.

namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// q of qkv (T, B, G*(r+2)*D) and k, v of kv (kv_len, B, G*2*D); d resolved.
flash_tiles::Operands block_operands(const float* qkv, const float* kv, const FlashAttentionDims& d,
                                     const int32_t* document_starts) {
  const int64_t D = d.head_dim, kv_row = d.micro_batch * (d.heads / d.group_size) * 2 * D;
  return {d,
          flash_tiles::qkv_rows(qkv, d, flash_tiles::QkvPart::q),
          {kv, 2 * D, kv_row},
          {kv + D, 2 * D, kv_row},
          document_starts};
}

// The (row, sample, kv head) positions of `sizes`, checked.
int64_t group_positions(const FlashRows& sizes, const char* op) {
  TRAINER_ASSERT(
      sizes.rows >= 0 && sizes.micro_batch >= 1 && sizes.heads >= 1 && sizes.head_dim >= 1 &&
          sizes.group_size >= 1 && sizes.heads % sizes.group_size == 0,
      op << ": rows " << sizes.rows << ", micro_batch " << sizes.micro_batch << ", heads "
         << sizes.heads << ", head_dim " << sizes.head_dim << ", group_size " << sizes.group_size);
  return sizes.rows * sizes.micro_batch * (sizes.heads / sizes.group_size);
}

}  // namespace

void pack_kv(float* kv, const float* qkv, const FlashRows& sizes) {
  const int64_t positions = group_positions(sizes, "pack_kv");
  const int64_t D = sizes.head_dim, r = sizes.group_size, group = (r + 2) * D;
  const size_t bytes = static_cast<size_t>(2 * D) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < positions; ++p)
    std::memcpy(kv + p * 2 * D, qkv + p * group + r * D, bytes);
}

void flash_block_forward(float* ctx, float* lse, const float* qkv, const float* kv,
                         const FlashAttentionDims& dims, const int32_t* document_starts) {
  flash_tiles::forward(ctx, lse,
                       block_operands(qkv, kv, flash_tiles::resolve(dims), document_starts));
}

void flash_merge(float* ctx, float* lse, const float* ctx_block, const float* lse_block,
                 const FlashRows& sizes) {
  group_positions(sizes, "flash_merge");
  const int64_t T = sizes.rows, H = sizes.heads, D = sizes.head_dim;
  const int64_t BH = sizes.micro_batch * H;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < BH * T; ++row) {  // lse's order: (b, h, t)
    const float a = lse[row], b = lse_block[row];
    if (b == kMinusInf) continue;  // the block adds nothing (both -inf included)
    const int64_t bh = row / T, t = row % T;
    float* out = ctx + (t * BH + bh) * D;
    const float* in = ctx_block + (t * BH + bh) * D;
    if (a == kMinusInf) {
      std::copy(in, in + D, out);
      lse[row] = b;
      continue;
    }
    const float merged = std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b)));
    const float keep = std::exp(a - merged), take = std::exp(b - merged);
    for (int64_t d = 0; d < D; ++d) out[d] = keep * out[d] + take * in[d];
    lse[row] = merged;
  }
}

void flash_block_backward(float* dq, float* dkv, const float* dctx, const float* qkv,
                          const float* kv, const float* ctx, const float* lse,
                          const FlashAttentionDims& dims, const int32_t* document_starts) {
  const FlashAttentionDims d = flash_tiles::resolve(dims);
  const int64_t D = d.head_dim, BH = d.micro_batch * d.heads, kv_row = BH / d.group_size * 2 * D;
  const flash_tiles::Gradients out{
      {dq, D, BH * D}, {dkv, 2 * D, kv_row}, {dkv + D, 2 * D, kv_row}, true};
  flash_tiles::backward(out, dctx, ctx, lse, block_operands(qkv, kv, d, document_starts));
}

void assemble_qkv_grad(float* dqkv, const float* dq, const float* dkv, const FlashRows& sizes) {
  const int64_t positions = group_positions(sizes, "assemble_qkv_grad");
  const int64_t D = sizes.head_dim, r = sizes.group_size, group = (r + 2) * D;
  const size_t head_bytes = static_cast<size_t>(D) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < positions; ++p) {  // a group: its query heads' dq, then dk and dv
    std::memcpy(dqkv + p * group, dq + p * r * D, static_cast<size_t>(r) * head_bytes);
    std::memcpy(dqkv + p * group + r * D, dkv + p * 2 * D, 2 * head_bytes);
  }
}

}  // namespace runtime::cpu
