// Device-dispatching operators: the model calls these with tensors, and each call runs on the
// device of one named tensor (host tensors: the CPU kernels of runtime/kernels/cpu; device
// tensors: the registered backend). One list, TRAINER_OPS, declares every operator; the backend
// table, the functions, their dispatch and every backend's registration are generated from it.
#pragma once

#include <cstddef>

#include "runtime/op_args.h"
#include "runtime/tensor.h"

namespace runtime::ops {

// Note [Op list]
// OP(result, name, Args, on): the compute operator `result name(const Args&)` (its struct in
// runtime/op_args.h), run on the device of the tensor args.on. MEMORY_OP(result, name, params):
// a memory operator whose arguments are only tensors, so it keeps its plain parameter list (a
// struct of one or two tensors would name nothing a parameter does not); its function and its
// checks are written out below. Adding an operator: its struct, one line here, a host adapter
// (ops.cpp), a CUDA adapter (cuda_ops.cu) and a row of the op twins (tests/unit/ops, which
// fail for a listed operator without one).
#define TRAINER_OPS(OP, MEMORY_OP)                                                      \
  OP(void, linear_forward, LinearForward, out)                                          \
  OP(void, linear_backward, LinearBackward, dweight) /* dinput is optional */           \
  OP(void, linear_gelu_forward, LinearGeluForward, out)                                 \
  OP(void, gelu_linear_backward, GeluLinearBackward, dweight)                           \
  OP(void, layernorm_forward, LayernormForward, out)                                    \
  OP(void, layernorm_backward, LayernormBackward, dinput)                               \
  OP(void, rmsnorm_forward, RmsnormForward, out)                                        \
  OP(void, rmsnorm_backward, RmsnormBackward, dinput)                                   \
  OP(void, causal_softmax_forward, CausalSoftmaxForward, probs)                         \
  OP(void, causal_softmax_backward, CausalSoftmaxBackward, dscores)                     \
  OP(void, gelu_forward, GeluForward, out)                                              \
  OP(void, gelu_backward, GeluBackward, dinput)                                         \
  OP(void, swiglu_forward, SwigluForward, out)                                          \
  OP(void, swiglu_backward, SwigluBackward, dinput)                                     \
  OP(void, dropout_hidden_forward, DropoutHiddenForward, out)                           \
  OP(void, dropout_attention_forward, DropoutAttentionForward, out)                     \
  OP(void, dropout_backward, DropoutBackward, dinput)                                   \
  OP(void, dropout_add_hidden_forward, DropoutAddHiddenForward, out)                    \
  OP(void, embedding_forward, EmbeddingForward, out)                                    \
  OP(void, embedding_backward, EmbeddingBackward, dwte)                                 \
  OP(void, position_embedding_forward, PositionEmbeddingForward, out)                   \
  OP(void, position_embedding_backward, PositionEmbeddingBackward, dwpe)                \
  OP(void, cross_entropy_forward, CrossEntropyForward, losses)                          \
  OP(void, cross_entropy_backward, CrossEntropyBackward, dlogits)                       \
  OP(void, vocab_shard_max, VocabShardMax, row_max)                                     \
  OP(void, vocab_shard_sum_exp, VocabShardSumExp, row_sum)                              \
  OP(void, vocab_shard_target_logit, VocabShardTargetLogit, target_logit)               \
  OP(void, vocab_shard_finish, VocabShardFinish, losses)                                \
  OP(void, vocab_shard_cross_entropy_backward, VocabShardCrossEntropyBackward, dlogits) \
  OP(void, split_qkv_heads, SplitQkvHeads, q)                                           \
  OP(void, merge_qkv_heads, MergeQkvHeads, dqkv)                                        \
  OP(void, merge_heads, MergeHeads, ctx)                                                \
  OP(void, split_heads, SplitHeads, ctx_heads)                                          \
  OP(void, rope_forward, RopeForward, qkv)                                              \
  OP(void, rope_backward, RopeBackward, dqkv)                                           \
  OP(void, qk_norm_forward, QkNormForward, qkv)                                         \
  OP(void, qk_norm_backward, QkNormBackward, dqkv)                                      \
  OP(void, attention_scores_forward, AttentionScoresForward, scores)                    \
  OP(void, attention_scores_backward, AttentionScoresBackward, dq)                      \
  OP(void, attention_context_forward, AttentionContextForward, ctx_heads)               \
  OP(void, attention_context_backward, AttentionContextBackward, dprobs)                \
  OP(void, flash_attention_forward, FlashAttentionForward, ctx)                         \
  OP(void, flash_attention_backward, FlashAttentionBackward, dqkv)                      \
  OP(void, pack_kv, PackKv, kv)                                                         \
  OP(void, flash_block_forward, FlashBlockForward, ctx)                                 \
  OP(void, flash_merge, FlashMerge, ctx)                                                \
  OP(void, flash_block_backward, FlashBlockBackward, dq)                                \
  OP(void, assemble_qkv_grad, AssembleQkvGrad, dqkv)                                    \
  OP(void, add, Add, out)                                                               \
  OP(void, add_bias, AddBias, out)                                                      \
  OP(void, scale_inplace, ScaleInplace, x)                                              \
  OP(double, sum_squares, SumSquares, x)                                                \
  OP(void, adamw_step, AdamwStep, param)                                                \
  OP(void, init_param, InitParam, out)                                                  \
  MEMORY_OP(void, convert, (const Tensor& dst, const Tensor& src))                      \
  MEMORY_OP(void, synchronize, ())                                                      \
  MEMORY_OP(void, copy, (const Tensor& dst, const Tensor& src))                         \
  MEMORY_OP(void, upload, (const Tensor& device_dst, const Tensor& host_src))           \
  MEMORY_OP(void, download, (const Tensor& host_dst, const Tensor& device_src))         \
  MEMORY_OP(void, zero, (const Tensor& t))                                              \
  MEMORY_OP(double, sum, (const Tensor& t))

// A device backend: one entry per operator of TRAINER_OPS, in its order.
struct Backend {
#define TRAINER_OPS_BACKEND_OP(result, name, Args, on) result (*name)(const Args& args);
#define TRAINER_OPS_BACKEND_MEMORY_OP(result, name, params) result(*name) params;
  TRAINER_OPS(TRAINER_OPS_BACKEND_OP, TRAINER_OPS_BACKEND_MEMORY_OP)
#undef TRAINER_OPS_BACKEND_OP
#undef TRAINER_OPS_BACKEND_MEMORY_OP
};

#define TRAINER_OPS_COUNT_ENTRY(...) +1
inline constexpr size_t kBackendEntries =
    0 TRAINER_OPS(TRAINER_OPS_COUNT_ENTRY, TRAINER_OPS_COUNT_ENTRY);
static_assert(sizeof(Backend) == kBackendEntries * sizeof(void (*)()),
              "ops::Backend holds an entry that TRAINER_OPS does not list");

// The host kernels as a backend table: what host tensors run. Its entries work on any memory
// the host can address, so a device backend over host memory may reuse it (the tests emulate
// a device this way to run the trainer's device path without a GPU).
const Backend& host_backend();

// Installs the backend of device tensors (runtime_cuda calls this once).
void register_device_backend(const Backend* backend);
// The registered backend; throws LibraryError naming the operator when none is.
const Backend& device_backend(const char* op);

// The compute operators: ops::linear_forward({.out = ..., ...}) and so on.
#define TRAINER_OPS_DECLARE_OP(result, name, Args, on) result name(const Args& args);
#define TRAINER_OPS_WRITTEN_OUT(...)
TRAINER_OPS(TRAINER_OPS_DECLARE_OP, TRAINER_OPS_WRITTEN_OUT)
#undef TRAINER_OPS_DECLARE_OP
#undef TRAINER_OPS_WRITTEN_OUT

// ---- the memory operators ----

// dst = src converted to dst's dtype (f32 <-> bf16, round to nearest even; same dtype: a
// copy); one device, one element count.
void convert(const Tensor& dst, const Tensor& src);
// Returns when every op queued on `on`'s device so far has finished (host: at once). Timers
// call it: device ops are asynchronous.
void synchronize(const Tensor& on);
// Same device, same dtype, same size.
void copy(const Tensor& dst, const Tensor& src);
// Between host and device tensors of one size and dtype (a plain copy when both are host);
// synchronous.
void upload(const Tensor& dst, const Tensor& host_src);
void download(const Tensor& host_dst, const Tensor& src);
// Every byte 0.
void zero(const Tensor& t);
// The sum of an f32 tensor's elements in double, on the host when it returns.
double sum(const Tensor& t);

}  // namespace runtime::ops
