// The bytes each CUDA operator asks of CudaContext::scratch (Note [Device scratch] in
// runtime/device_scratch.h): the operators take their scratch by these, and the table registered
// with the backend lets the meta replay of a CUDA run grow the same buffer.
#pragma once

#include <cstddef>

#include "runtime/device_scratch.h"
#include "runtime/op_args.h"
#include "runtime/tensor.h"

namespace runtime::cuda::scratch_bytes {

size_t linear_backward(const ops::LinearBackward& args);
size_t gelu_linear_backward(const ops::GeluLinearBackward& args);
size_t layernorm_backward(const ops::LayernormBackward& args);
size_t rmsnorm_backward(const ops::RmsnormBackward& args);
size_t qk_norm_backward(const ops::QkNormBackward& args);
size_t embedding_backward(const ops::EmbeddingBackward& args);
size_t flash_attention_backward(const ops::FlashAttentionBackward& args);
size_t flash_block_backward(const ops::FlashBlockBackward& args);
// The deterministic reductions to the host: the result, then the partial sums.
size_t reduction(int64_t count);

// Every operator's entry (null for those that take none).
const ScratchSizes& table();

}  // namespace runtime::cuda::scratch_bytes
