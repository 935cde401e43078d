// Rotary position embedding on the fused qkv activations, in place (Note [Rotary layout] in
// runtime/op_args.h): the q heads and the k head of every key/value group rotated by their
// row's global position, v untouched; the backward rotates the gradient back (angle -> -angle).
#pragma once

#include <cstdint>

#include "runtime/rotary.h"

namespace runtime::cpu {

// The shape of one rotary call: qkv is (seq, micro_batch, kv_heads * (group_size + 2) *
// head_dim), row t of sample b at position seq_offset + t - document_starts[t * micro_batch + b]
// (the last term 0 when document_starts is null: Note [Document positions] in
// runtime/op_args.h); head_dim even.
struct RopeDims {
  int64_t seq;
  int64_t micro_batch;
  int64_t kv_heads;
  int64_t group_size;
  int64_t head_dim;
  int64_t seq_offset;
  float base;
  RopeScaling scaling{};                     // factor 0: none
  const int32_t* document_starts = nullptr;  // (seq, micro_batch), or null (on the kernel's device)
};

// qkv's q and k heads rotated by +angle, in place.
void rope_forward(float* qkv, const RopeDims& dims);
// dqkv's q and k heads rotated by -angle (the transpose of the forward's rotation), in place.
void rope_backward(float* dqkv, const RopeDims& dims);

}  // namespace runtime::cpu
