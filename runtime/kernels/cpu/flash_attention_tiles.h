// Internal to the host flash kernels (flash_attention.cpp, flash_block.cpp): the tiled
// forward and backward over a query block and a key block wherever their rows live, which
// both the whole-sequence operators and the block operators call. Not for other callers.
#pragma once

#include <cstdint>

#include "runtime/kernels/cpu/flash_attention.h"

namespace runtime::cpu::flash_tiles {

// Per-head rows of a [s, b, h] tensor: row t of (sample, head) bh starts at
// data + bh * head_stride + t * row_stride.
template <class Float>
struct HeadRows {
  Float* data;
  int64_t head_stride;
  int64_t row_stride;
};
using InputRows = HeadRows<const float>;
using OutputRows = HeadRows<float>;

// One call's operands: its dims (kv_len and full_len resolved, never 0) and where q, k, v of
// each head live. ctx and dctx are (seq_len, B, H*D); lse is (B, H, seq_len).
struct Operands {
  FlashAttentionDims dims;
  InputRows q, k, v;
};

// The dims with kv_len and full_len resolved (0 -> seq_len), checked: sizes in range, the
// query and key blocks inside the full_len positions.
FlashAttentionDims resolve(const FlashAttentionDims& dims);

// ctx (=) and lse (=) of the queries over the keys (a query with no visible key: ctx 0,
// lse -inf).
void forward(float* ctx, float* lse, const Operands& in);

// Where the gradients go; accumulate: += (the block operators) rather than = (the whole
// sequence).
struct Gradients {
  OutputRows dq, dk, dv;
  bool accumulate;
};

// dq, dk, dv from dctx and the forward's (or the merged) ctx and lse.
void backward(const Gradients& out, const float* dctx, const float* ctx, const float* lse,
              const Operands& in);

}  // namespace runtime::cpu::flash_tiles
