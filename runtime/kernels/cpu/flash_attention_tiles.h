// Internal to the host flash kernels (flash_attention.cpp, flash_block.cpp): the tiled
// forward and backward over a query block and a key block wherever their rows live, which
// both the whole-sequence operators and the block operators call. Not for other callers.
#pragma once

#include <cstdint>

#include "runtime/kernels/cpu/flash_attention.h"

namespace runtime::cpu::flash_tiles {

// Per-head rows of a [s, b, h] tensor: row t of head x (a (sample, head) index) starts at
// head(x) + t * row_stride. Heads come in groups of per_group, head_stride apart inside a group
// and group_stride between groups (the query heads of one kv head in a grouped qkv, Note
// [Grouped-query attention] in runtime/op_args.h); per_group 1: x * group_stride.
template <class Float>
struct HeadRows {
  Float* data;
  int64_t group_stride;
  int64_t row_stride;
  int64_t head_stride = 0;
  int64_t per_group = 1;
  Float* head(int64_t x) const {
    return data + x / per_group * group_stride + x % per_group * head_stride;
  }
};
using InputRows = HeadRows<const float>;
using OutputRows = HeadRows<float>;

// One call's operands: its dims (kv_len and full_len resolved, never 0) and where q (by query
// head bh), k and v (by kv head bh / group_size) live. ctx and dctx are (seq_len, B, H*D); lse
// is (B, H, seq_len). document_starts: (seq_len, B) global positions, or null (Note [Document
// masking] in runtime/op_args.h).
struct Operands {
  FlashAttentionDims dims;
  InputRows q, k, v;
  const int32_t* document_starts = nullptr;
};

// The q, k or v features of a grouped qkv (T, B, G*(r+2)*D), r = group_size, G = heads / r:
// q by query head, k and v by kv head. dims resolved.
enum class QkvPart { q, k, v };
template <class Float>
HeadRows<Float> qkv_rows(Float* qkv, const FlashAttentionDims& dims, QkvPart part) {
  const int64_t D = dims.head_dim, r = dims.group_size, group = (r + 2) * D;
  const int64_t row = dims.micro_batch * (dims.heads / r) * group;
  switch (part) {
    case QkvPart::q:
      return {qkv, group, row, D, r};
    case QkvPart::k:
      return {qkv + r * D, group, row};
    case QkvPart::v:
      break;
  }
  return {qkv + (r + 1) * D, group, row};
}

// The dims with kv_len and full_len resolved (0 -> seq_len), checked: sizes in range, the
// group size dividing the heads, the query and key blocks inside the full_len positions.
FlashAttentionDims resolve(const FlashAttentionDims& dims);

// ctx (=) and lse (=) of the queries over the keys (a query with no visible key: ctx 0,
// lse -inf).
void forward(float* ctx, float* lse, const Operands& in);

// Where the gradients go (dq by query head, dk and dv by kv head); accumulate: += (the block
// operators) rather than = (the whole sequence).
struct Gradients {
  OutputRows dq, dk, dv;
  bool accumulate;
};

// dq, dk, dv from dctx and the forward's (or the merged) ctx and lse.
void backward(const Gradients& out, const float* dctx, const float* ctx, const float* lse,
              const Operands& in);

}  // namespace runtime::cpu::flash_tiles
