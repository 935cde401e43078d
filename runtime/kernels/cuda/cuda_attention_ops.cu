// The CUDA backend's attention entries (cuda_op_entries.h): the unfused path's softmax, head
// layouts and batched products, flash attention, and ring attention's blocks.
#include <cuda_bf16.h>

#include <cstdint>

#include "runtime/error.h"
#include "runtime/kernels/cpu/flash_attention.h"
#include "runtime/kernels/cuda/attention_gemm.h"
#include "runtime/kernels/cuda/attention_layout.h"
#include "runtime/kernels/cuda/cuda_op_entries.h"
#include "runtime/kernels/cuda/flash_attention.h"
#include "runtime/kernels/cuda/flash_block.h"
#include "runtime/kernels/cuda/scratch_sizes.h"
#include "runtime/kernels/cuda/softmax.h"

namespace runtime::cuda::device_op {

const int32_t* document_ptr(const Tensor& document_starts) {
  return ptr<const int32_t>(document_starts);
}

// The softmax's window and documents; the kernels check that micro_batch divides batch_heads.
template <class Args>
cpu::SoftmaxMask softmax_mask(const Args& args) {
  return {.window = args.window,
          .document_starts = document_ptr(args.document_starts),
          .micro_batch = args.micro_batch,
          .heads_per_sample = args.micro_batch >= 1 ? args.batch_heads / args.micro_batch : 0};
}

void causal_softmax_forward(const ops::CausalSoftmaxForward& args) {
  const int64_t n = args.batch_heads * args.seq * args.seq;
  const DType act =
      check_args("causal_softmax_forward",
                 {arg("probs", args.probs, kAct, n), arg("scores", args.scores, kAct, n),
                  document_arg(args.document_starts, args.seq, args.micro_batch)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::causal_softmax_forward(act_ptr(args.probs), act_ptr(args.scores), args.batch_heads,
                                 args.seq, softmax_mask(args), stream);
  });
}

void causal_softmax_backward(const ops::CausalSoftmaxBackward& args) {
  const int64_t n = args.batch_heads * args.seq * args.seq;
  const DType act =
      check_args("causal_softmax_backward",
                 {arg("dscores", args.dscores, kAct, n), arg("dprobs", args.dprobs, kAct, n),
                  arg("probs", args.probs, kAct, n),
                  document_arg(args.document_starts, args.seq, args.micro_batch)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::causal_softmax_backward(act_ptr(args.dscores), act_ptr(args.dprobs), act_ptr(args.probs),
                                  args.batch_heads, args.seq, softmax_mask(args), stream);
  });
}

// Elements of one per-head q (or ctx_heads): micro_batch * heads * seq * head_dim.
template <class Args>
int64_t head_elements(const Args& args) {
  return args.micro_batch * args.heads * args.seq * args.head_dim;
}

// Of k or v, one per kv head (Note [Grouped-query attention]), and of the grouped qkv; the
// kernels check that group_size divides the heads.
template <class Args>
int64_t kv_head_elements(const Args& args) {
  return args.group_size >= 1 ? head_elements(args) / args.group_size : 0;
}
template <class Args>
int64_t qkv_elements(const Args& args) {
  return head_elements(args) + 2 * kv_head_elements(args);
}

void split_qkv_heads(const ops::SplitQkvHeads& args) {
  const int64_t n = head_elements(args), kv = kv_head_elements(args);
  const DType act =
      check_args("split_qkv_heads",
                 {arg("q", args.q, kAct, n), arg("k", args.k, kAct, kv), arg("v", args.v, kAct, kv),
                  arg("qkv", args.qkv, kAct, qkv_elements(args))});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::split_qkv_heads(act_ptr(args.q), act_ptr(args.k), act_ptr(args.v), act_ptr(args.qkv),
                          args.seq, args.micro_batch, args.heads, args.head_dim, args.group_size,
                          stream);
  });
}

void merge_qkv_heads(const ops::MergeQkvHeads& args) {
  const int64_t n = head_elements(args), kv = kv_head_elements(args);
  const DType act =
      check_args("merge_qkv_heads",
                 {arg("dqkv", args.dqkv, kAct, qkv_elements(args)), arg("dq", args.dq, kAct, n),
                  arg("dk", args.dk, kAct, kv), arg("dv", args.dv, kAct, kv)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::merge_qkv_heads(act_ptr(args.dqkv), act_ptr(args.dq), act_ptr(args.dk), act_ptr(args.dv),
                          args.seq, args.micro_batch, args.heads, args.head_dim, args.group_size,
                          stream);
  });
}

void merge_heads(const ops::MergeHeads& args) {
  const int64_t n = head_elements(args);
  const DType act = check_args(
      "merge_heads", {arg("ctx", args.ctx, kAct, n), arg("ctx_heads", args.ctx_heads, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::merge_heads(act_ptr(args.ctx), act_ptr(args.ctx_heads), args.seq, args.micro_batch,
                      args.heads, args.head_dim, stream);
  });
}

void split_heads(const ops::SplitHeads& args) {
  const int64_t n = head_elements(args);
  const DType act = check_args(
      "split_heads", {arg("ctx_heads", args.ctx_heads, kAct, n), arg("ctx", args.ctx, kAct, n)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::split_heads(act_ptr(args.ctx_heads), act_ptr(args.ctx), args.seq, args.micro_batch,
                      args.heads, args.head_dim, stream);
  });
}

// The per-kv-head operands of the products: batch_heads / group_size heads of (seq, head_dim)
// (the GEMMs check that group_size divides batch_heads).
template <class Args>
int64_t kv_product_elements(const Args& args) {
  const int64_t kv_heads = args.group_size >= 1 ? args.batch_heads / args.group_size : 0;
  return kv_heads * args.seq * args.head_dim;
}

void attention_scores_forward(const ops::AttentionScoresForward& args) {
  const int64_t batch_heads = args.batch_heads, seq = args.seq, head_dim = args.head_dim;
  const int64_t n = batch_heads * seq * head_dim, kv = kv_product_elements(args);
  const DType act = check_args("attention_scores_forward",
                               {arg("scores", args.scores, kAct, batch_heads * seq * seq),
                                arg("q", args.q, kAct, n), arg("k", args.k, kAct, kv)});
  CudaContext& c = context();
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::attention_scores_forward(act_ptr(args.scores), act_ptr(args.q), act_ptr(args.k),
                                   batch_heads, seq, head_dim, args.scale, args.group_size,
                                   c.cublas(), stream);
  });
}

void attention_scores_backward(const ops::AttentionScoresBackward& args) {
  const int64_t batch_heads = args.batch_heads, seq = args.seq, head_dim = args.head_dim;
  const int64_t n = batch_heads * seq * head_dim, kv = kv_product_elements(args);
  const DType act = check_args("attention_scores_backward",
                               {arg("dq", args.dq, kAct, n), arg("dk", args.dk, kAct, kv),
                                arg("dscores", args.dscores, kAct, batch_heads * seq * seq),
                                arg("q", args.q, kAct, n), arg("k", args.k, kAct, kv)});
  CudaContext& c = context();
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::attention_scores_backward(act_ptr(args.dq), act_ptr(args.dk), act_ptr(args.dscores),
                                    act_ptr(args.q), act_ptr(args.k), batch_heads, seq, head_dim,
                                    args.scale, args.group_size, c.cublas(), stream);
  });
}

void attention_context_forward(const ops::AttentionContextForward& args) {
  const int64_t batch_heads = args.batch_heads, seq = args.seq, head_dim = args.head_dim;
  const int64_t n = batch_heads * seq * head_dim, kv = kv_product_elements(args);
  const DType act = check_args(
      "attention_context_forward",
      {arg("ctx_heads", args.ctx_heads, kAct, n),
       arg("probs", args.probs, kAct, batch_heads * seq * seq), arg("v", args.v, kAct, kv)});
  CudaContext& c = context();
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::attention_context_forward(act_ptr(args.ctx_heads), act_ptr(args.probs), act_ptr(args.v),
                                    batch_heads, seq, head_dim, args.group_size, c.cublas(),
                                    stream);
  });
}

void attention_context_backward(const ops::AttentionContextBackward& args) {
  const int64_t batch_heads = args.batch_heads, seq = args.seq, head_dim = args.head_dim;
  const int64_t n = batch_heads * seq * head_dim, kv = kv_product_elements(args);
  const DType act = check_args(
      "attention_context_backward",
      {arg("dprobs", args.dprobs, kAct, batch_heads * seq * seq), arg("dv", args.dv, kAct, kv),
       arg("dctx_heads", args.dctx_heads, kAct, n),
       arg("probs", args.probs, kAct, batch_heads * seq * seq), arg("v", args.v, kAct, kv)});
  CudaContext& c = context();
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::attention_context_backward(
        act_ptr(args.dprobs), act_ptr(args.dv), act_ptr(args.dctx_heads), act_ptr(args.probs),
        act_ptr(args.v), batch_heads, seq, head_dim, args.group_size, c.cublas(), stream);
  });
}

// The (seq, micro_batch, query head) positions of a flash attention call: ctx and dctx hold
// head_dim elements per position, lse one.
int64_t flash_positions(const cpu::FlashAttentionDims& dims) {
  return dims.seq_len * dims.micro_batch * dims.heads;
}
// Elements of the grouped qkv (and dqkv) of `rows` positions (Note [Grouped-query attention]):
// heads / group_size groups of (group_size + 2) * head_dim; the kernels check the group size.
int64_t grouped_qkv_elements(int64_t rows, int64_t micro_batch, int64_t heads, int64_t head_dim,
                             int64_t group_size) {
  if (group_size < 1) return 0;
  return rows * micro_batch * (heads / group_size) * (group_size + 2) * head_dim;
}
int64_t flash_qkv_elements(const cpu::FlashAttentionDims& dims) {
  return grouped_qkv_elements(dims.seq_len, dims.micro_batch, dims.heads, dims.head_dim,
                              dims.group_size);
}
// The document starts of a flash call's (or block's) seq_len query rows.
Arg flash_document_arg(const Tensor& document_starts, const cpu::FlashAttentionDims& dims) {
  return document_arg(document_starts, dims.seq_len, dims.micro_batch);
}
// The key/value positions of a ring block: (kv_len, micro_batch, kv head).
int64_t flash_key_positions(const cpu::FlashAttentionDims& dims) {
  if (dims.group_size < 1) return 0;
  return (dims.kv_len == 0 ? dims.seq_len : dims.kv_len) * dims.micro_batch *
         (dims.heads / dims.group_size);
}

void flash_attention_forward(const ops::FlashAttentionForward& args) {
  const cpu::FlashAttentionDims& dims = args.dims;
  const int64_t positions = flash_positions(dims);
  const DType act =
      check_args("flash_attention_forward", {arg("ctx", args.ctx, kAct, positions * dims.head_dim),
                                             arg("lse", args.lse, kF32, positions),
                                             arg("qkv", args.qkv, kAct, flash_qkv_elements(dims)),
                                             flash_document_arg(args.document_starts, dims)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::flash_attention_forward(act_ptr(args.ctx), ptr<float>(args.lse), act_ptr(args.qkv), dims,
                                  document_ptr(args.document_starts), stream);
  });
}

void flash_attention_backward(const ops::FlashAttentionBackward& args) {
  const cpu::FlashAttentionDims& dims = args.dims;
  const int64_t positions = flash_positions(dims);
  const DType act = check_args(
      "flash_attention_backward",
      {arg("dqkv", args.dqkv, kAct, flash_qkv_elements(dims)),
       arg("dctx", args.dctx, kAct, positions * dims.head_dim),
       arg("qkv", args.qkv, kAct, flash_qkv_elements(dims)),
       arg("ctx", args.ctx, kAct, positions * dims.head_dim), arg("lse", args.lse, kF32, positions),
       flash_document_arg(args.document_starts, dims)});
  CudaContext& c = context();
  void* scratch = c.scratch(scratch_bytes::flash_attention_backward(args));
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::flash_attention_backward(act_ptr(args.dqkv), act_ptr(args.dctx), act_ptr(args.qkv),
                                   act_ptr(args.ctx), ptr<float>(args.lse), dims,
                                   document_ptr(args.document_starts), scratch, stream);
  });
}

// ---- ring attention's blocks (Note [Flash blocks]) ----

cpu::FlashRows flash_rows(int64_t rows, int64_t micro_batch, int64_t heads, int64_t head_dim,
                          int64_t group_size = 1) {
  return cpu::FlashRows{rows, micro_batch, heads, head_dim, group_size};
}

// The (rows, micro_batch, kv head) positions of a PackKv or AssembleQkvGrad.
template <class Args>
int64_t kv_positions(const Args& args) {
  return args.group_size >= 1 ? args.rows * args.micro_batch * (args.heads / args.group_size) : 0;
}
template <class Args>
int64_t qkv_elements_of(const Args& args) {
  return grouped_qkv_elements(args.rows, args.micro_batch, args.heads, args.head_dim,
                              args.group_size);
}

void pack_kv(const ops::PackKv& args) {
  const DType act =
      check_args("pack_kv", {arg("kv", args.kv, kAct, kv_positions(args) * 2 * args.head_dim),
                             arg("qkv", args.qkv, kAct, qkv_elements_of(args))});
  const cpu::FlashRows sizes =
      flash_rows(args.rows, args.micro_batch, args.heads, args.head_dim, args.group_size);
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::pack_kv(act_ptr(args.kv), act_ptr(args.qkv), sizes, stream);
  });
}

void flash_block_forward(const ops::FlashBlockForward& args) {
  const cpu::FlashAttentionDims& dims = args.dims;
  const int64_t queries = flash_positions(dims);
  const int64_t keys = flash_key_positions(dims);
  const DType act =
      check_args("flash_block_forward", {arg("qkv", args.qkv, kAct, flash_qkv_elements(dims)),
                                         arg("kv", args.kv, kAct, keys * 2 * dims.head_dim),
                                         arg("ctx", args.ctx, kF32, queries * dims.head_dim),
                                         arg("lse", args.lse, kF32, queries),
                                         flash_document_arg(args.document_starts, dims)});
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::flash_block_forward(ptr<float>(args.ctx), ptr<float>(args.lse), act_ptr(args.qkv),
                              act_ptr(args.kv), dims, document_ptr(args.document_starts), stream);
  });
}

void flash_merge(const ops::FlashMerge& args) {
  const int64_t positions = args.rows * args.micro_batch * args.heads;
  check_args("flash_merge", {arg("ctx", args.ctx, kF32, positions * args.head_dim),
                             arg("lse", args.lse, kF32, positions),
                             arg("ctx_block", args.ctx_block, kF32, positions * args.head_dim),
                             arg("lse_block", args.lse_block, kF32, positions)});
  cuda::flash_merge(ptr<float>(args.ctx), ptr<float>(args.lse), ptr<float>(args.ctx_block),
                    ptr<float>(args.lse_block),
                    flash_rows(args.rows, args.micro_batch, args.heads, args.head_dim),
                    context().stream());
}

void flash_block_backward(const ops::FlashBlockBackward& args) {
  const cpu::FlashAttentionDims& dims = args.dims;
  const int64_t queries = flash_positions(dims);
  const int64_t keys = flash_key_positions(dims);
  const DType act =
      check_args("flash_block_backward", {arg("dctx", args.dctx, kAct, queries * dims.head_dim),
                                          arg("qkv", args.qkv, kAct, flash_qkv_elements(dims)),
                                          arg("kv", args.kv, kAct, keys * 2 * dims.head_dim),
                                          arg("ctx", args.ctx, kAct, queries * dims.head_dim),
                                          arg("dq", args.dq, kF32, queries * dims.head_dim),
                                          arg("dkv", args.dkv, kF32, keys * 2 * dims.head_dim),
                                          arg("lse", args.lse, kF32, queries),
                                          flash_document_arg(args.document_starts, dims)});
  CudaContext& c = context();
  void* scratch = c.scratch(scratch_bytes::flash_block_backward(args));
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::flash_block_backward(ptr<float>(args.dq), ptr<float>(args.dkv), act_ptr(args.dctx),
                               act_ptr(args.qkv), act_ptr(args.kv), act_ptr(args.ctx),
                               ptr<float>(args.lse), dims, document_ptr(args.document_starts),
                               scratch, stream);
  });
}

void assemble_qkv_grad(const ops::AssembleQkvGrad& args) {
  const int64_t queries = args.rows * args.micro_batch * args.heads;
  const DType act = check_args(
      "assemble_qkv_grad", {arg("dqkv", args.dqkv, kAct, qkv_elements_of(args)),
                            arg("dq", args.dq, kF32, queries * args.head_dim),
                            arg("dkv", args.dkv, kF32, kv_positions(args) * 2 * args.head_dim)});
  const cpu::FlashRows sizes =
      flash_rows(args.rows, args.micro_batch, args.heads, args.head_dim, args.group_size);
  with_act(act, [&](auto act_ptr, cudaStream_t stream) {
    cuda::assemble_qkv_grad(act_ptr(args.dqkv), ptr<float>(args.dq), ptr<float>(args.dkv), sizes,
                            stream);
  });
}

}  // namespace runtime::cuda::device_op
