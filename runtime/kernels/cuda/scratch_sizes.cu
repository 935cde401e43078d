// The CUDA operators' scratch sizes (scratch_sizes.h).
#include <algorithm>

#include "runtime/kernels/cuda/elementwise.h"
#include "runtime/kernels/cuda/embedding.h"
#include "runtime/kernels/cuda/flash_attention.h"
#include "runtime/kernels/cuda/layernorm.h"
#include "runtime/kernels/cuda/rmsnorm.h"
#include "runtime/kernels/cuda/scratch_sizes.h"

namespace runtime::cuda::scratch_bytes {

size_t linear_backward(const ops::LinearBackward& args) {
  return args.dbias.defined() ? static_cast<size_t>(args.out_features) * sizeof(float) : 0;
}

size_t gelu_linear_backward(const ops::GeluLinearBackward& args) {
  return static_cast<size_t>(std::max(args.in_features, args.out_features)) * sizeof(float);
}

size_t layernorm_backward(const ops::LayernormBackward& args) {
  return layernorm_backward_scratch_bytes(args.rows, args.channels);
}

size_t rmsnorm_backward(const ops::RmsnormBackward& args) {
  return rmsnorm_backward_scratch_bytes(args.rows, args.channels);
}

size_t qk_norm_backward(const ops::QkNormBackward& args) {
  const ops::QkNormHeads& h = args.heads;
  return qk_norm_backward_scratch_bytes({h.rows, h.kv_heads, h.group_size, h.head_dim});
}

size_t embedding_backward(const ops::EmbeddingBackward& args) {
  return embedding_backward_scratch_bytes(args.rows, args.vocab_rows);
}

size_t flash_attention_backward(const ops::FlashAttentionBackward& args) {
  return flash_attention_backward_scratch_bytes(args.dims);
}

size_t flash_block_backward(const ops::FlashBlockBackward& args) {
  return flash_attention_backward_scratch_bytes(args.dims);
}

size_t reduction(int64_t count) {
  return static_cast<size_t>(1 + sum_partial_count(count)) * sizeof(double);
}

const ScratchSizes& table() {
  static const ScratchSizes sizes = [] {
    ScratchSizes s{};
    s.linear_backward = &linear_backward;
    s.gelu_linear_backward = &gelu_linear_backward;
    s.layernorm_backward = &layernorm_backward;
    s.rmsnorm_backward = &rmsnorm_backward;
    s.qk_norm_backward = &qk_norm_backward;
    s.embedding_backward = &embedding_backward;
    s.flash_attention_backward = &flash_attention_backward;
    s.flash_block_backward = &flash_block_backward;
    s.sum_squares = [](const ops::SumSquares& args) { return reduction(args.count); };
    s.sum = [](const Tensor& t) { return reduction(t.numel()); };
    return s;
  }();
  return sizes;
}

}  // namespace runtime::cuda::scratch_bytes
