// Cross-entropy kernels: one thread block per logit row, reductions in a fixed order (strided
// per-thread partials, warp butterfly, warps in index order): bit-identical run to run. Each
// gradient element is read and written by the same thread, so dlogits may alias logits.
#include <algorithm>
#include <climits>
#include <cmath>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cross_entropy.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/op_types.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

constexpr int kMaxRowThreads = 512;  // threads of the block that handles one row
constexpr int kTargetThreads = 256;  // threads per block of the one-thread-per-row kernel

// Max over x[0, cols) of the block's row (-inf for cols == 0).
template <typename Element>
__device__ float block_max(const Element* x, int64_t cols, float* partials) {
  float local = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) local = fmaxf(local, load_float(x + j));
  return block_reduce(local, partials, MaxOp{});
}

// Sum over x[0, cols) of exp(x - max_value).
template <typename Element>
__device__ float block_sum_exp(const Element* x, int64_t cols, float max_value, float* partials) {
  float local = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    local += expf(load_float(x + j) - max_value);
  return block_reduce(local, partials, SumOp{});
}

template <typename Element>
__global__ void cross_entropy_forward_kernel(float* losses, float* lse, const Element* logits,
                                             const int32_t* targets, int64_t vocab,
                                             int64_t padded_vocab) {
  __shared__ float partials[kMaxRowThreads / kWarpThreads];
  const int64_t row = blockIdx.x;
  const Element* x = logits + row * padded_vocab;
  const float max_value = block_max(x, vocab, partials);
  const float sum_exp = block_sum_exp(x, vocab, max_value, partials);
  if (threadIdx.x == 0) {
    const int32_t target = targets[row];
    if (target != kIgnoredTarget && (target < 0 || target >= vocab)) {
      lse[row] = NAN;
      losses[row] = NAN;
      return;
    }
    // In double, as the CPU twin: the loss is a small difference of two large numbers.
    const double row_lse = static_cast<double>(max_value) + log(static_cast<double>(sum_exp));
    lse[row] = static_cast<float>(row_lse);
    losses[row] = target == kIgnoredTarget
                      ? 0.f
                      : static_cast<float>(row_lse - static_cast<double>(load_float(x + target)));
  }
}

template <typename Element>
__global__ void shard_max_kernel(float* out, const Element* logits, int64_t real_cols,
                                 int64_t shard_cols) {
  __shared__ float partials[kMaxRowThreads / kWarpThreads];
  const int64_t row = blockIdx.x;
  const float max_value = block_max(logits + row * shard_cols, real_cols, partials);
  if (threadIdx.x == 0) out[row] = max_value;
}

template <typename Element>
__global__ void shard_sum_exp_kernel(float* out, const Element* logits, const float* max_values,
                                     int64_t real_cols, int64_t shard_cols) {
  __shared__ float partials[kMaxRowThreads / kWarpThreads];
  const int64_t row = blockIdx.x;
  const float sum = block_sum_exp(logits + row * shard_cols, real_cols, max_values[row], partials);
  if (threadIdx.x == 0) out[row] = sum;
}

template <typename Element>
__global__ void shard_target_logit_kernel(float* out, const Element* logits, const int32_t* targets,
                                          int64_t rows, int64_t vocab_start, int64_t real_cols,
                                          int64_t shard_cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const int64_t c = targets[row] - vocab_start;
  out[row] = (c >= 0 && c < real_cols) ? load_float(logits + row * shard_cols + c) : 0.f;
}

// dlogits = (exp(logit - lse) - [column == target - vocab_start]) * scale on real columns,
// 0 on padding and on a kIgnoredTarget row. `require_target`: any other target outside the real
// columns is an error (the fused loss), and its row gets NaN; otherwise it lies in another shard.
template <typename Element>
__global__ void softmax_gradient_kernel(Element* dlogits, const Element* logits, const float* lse,
                                        const int32_t* targets, int64_t vocab_start,
                                        int64_t real_cols, int64_t shard_cols, float scale,
                                        bool require_target) {
  const int64_t row = blockIdx.x;
  const Element* x = logits + row * shard_cols;
  Element* dx = dlogits + row * shard_cols;  // may be x itself
  const bool ignored = targets[row] == kIgnoredTarget;
  const int64_t target = static_cast<int64_t>(targets[row]) - vocab_start;
  const bool invalid = !ignored && require_target && (target < 0 || target >= real_cols);
  const float row_lse = lse[row];
  for (int64_t j = threadIdx.x; j < shard_cols; j += blockDim.x) {
    float value = 0.f;
    if (invalid) {
      value = NAN;
    } else if (j < real_cols && !ignored) {
      value = (expf(load_float(x + j) - row_lse) - (j == target ? 1.f : 0.f)) * scale;
    }
    store_float(dx + j, value);
  }
}

// Threads per row block: the columns rounded up to whole warps, at most kMaxRowThreads.
int row_threads(int64_t cols) {
  const int64_t warps = std::max<int64_t>((cols + kWarpThreads - 1) / kWarpThreads, 1);
  return static_cast<int>(std::min<int64_t>(warps * kWarpThreads, kMaxRowThreads));
}

unsigned row_blocks(int64_t rows) {
  TRAINER_ASSERT(rows >= 0 && rows <= INT_MAX, "cross entropy over " << rows << " rows");
  return static_cast<unsigned>(rows);
}

void check_shard(int64_t real_cols, int64_t shard_cols) {
  TRAINER_ASSERT(real_cols >= 0 && real_cols <= shard_cols,
                 "vocab shard of " << shard_cols << " columns, " << real_cols << " real");
}

template <typename Element>
void launch_forward(float* losses, float* lse, const Element* logits, const int32_t* targets,
                    int64_t rows, int64_t vocab, int64_t padded_vocab, cudaStream_t stream) {
  TRAINER_ASSERT(vocab > 0 && vocab <= padded_vocab,
                 "cross entropy vocab " << vocab << ", padded_vocab " << padded_vocab);
  const unsigned blocks = row_blocks(rows);
  if (blocks == 0) return;
  cross_entropy_forward_kernel<Element><<<blocks, row_threads(vocab), 0, stream>>>(
      losses, lse, logits, targets, vocab, padded_vocab);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_gradient(Element* dlogits, const Element* logits, const float* lse,
                     const int32_t* targets, int64_t rows, int64_t vocab_start, int64_t real_cols,
                     int64_t shard_cols, float scale, bool require_target, cudaStream_t stream) {
  const unsigned blocks = row_blocks(rows);
  if (blocks == 0 || shard_cols == 0) return;
  softmax_gradient_kernel<Element><<<blocks, row_threads(shard_cols), 0, stream>>>(
      dlogits, logits, lse, targets, vocab_start, real_cols, shard_cols, scale, require_target);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_shard_max(float* row_max, const Element* logits, int64_t rows, int64_t real_cols,
                      int64_t shard_cols, cudaStream_t stream) {
  check_shard(real_cols, shard_cols);
  const unsigned blocks = row_blocks(rows);
  if (blocks == 0) return;
  shard_max_kernel<Element>
      <<<blocks, row_threads(real_cols), 0, stream>>>(row_max, logits, real_cols, shard_cols);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_shard_sum_exp(float* row_sum, const Element* logits, const float* max_values,
                          int64_t rows, int64_t real_cols, int64_t shard_cols,
                          cudaStream_t stream) {
  check_shard(real_cols, shard_cols);
  const unsigned blocks = row_blocks(rows);
  if (blocks == 0) return;
  shard_sum_exp_kernel<Element><<<blocks, row_threads(real_cols), 0, stream>>>(
      row_sum, logits, max_values, real_cols, shard_cols);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_shard_target_logit(float* target_logit, const Element* logits, const int32_t* targets,
                               int64_t rows, int64_t vocab_start, int64_t real_cols,
                               int64_t shard_cols, cudaStream_t stream) {
  check_shard(real_cols, shard_cols);
  TRAINER_ASSERT(rows >= 0, "vocab shard target logit over " << rows << " rows");
  if (rows == 0) return;
  const int64_t blocks = (rows + kTargetThreads - 1) / kTargetThreads;
  TRAINER_ASSERT(blocks <= INT_MAX, "vocab shard target logit over " << rows << " rows");
  shard_target_logit_kernel<Element><<<static_cast<unsigned>(blocks), kTargetThreads, 0, stream>>>(
      target_logit, logits, targets, rows, vocab_start, real_cols, shard_cols);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                           int64_t rows, int64_t vocab, int64_t padded_vocab, cudaStream_t stream) {
  launch_forward(losses, lse, logits, targets, rows, vocab, padded_vocab, stream);
}

void cross_entropy_forward(float* losses, float* lse, const __nv_bfloat16* logits,
                           const int32_t* targets, int64_t rows, int64_t vocab,
                           int64_t padded_vocab, cudaStream_t stream) {
  launch_forward(losses, lse, logits, targets, rows, vocab, padded_vocab, stream);
}

void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                            const int32_t* targets, int64_t rows, int64_t vocab,
                            int64_t padded_vocab, float scale, cudaStream_t stream) {
  TRAINER_ASSERT(vocab > 0 && vocab <= padded_vocab,
                 "cross entropy vocab " << vocab << ", padded_vocab " << padded_vocab);
  launch_gradient(dlogits, logits, lse, targets, rows, 0, vocab, padded_vocab, scale, true, stream);
}

void cross_entropy_backward(__nv_bfloat16* dlogits, const __nv_bfloat16* logits, const float* lse,
                            const int32_t* targets, int64_t rows, int64_t vocab,
                            int64_t padded_vocab, float scale, cudaStream_t stream) {
  TRAINER_ASSERT(vocab > 0 && vocab <= padded_vocab,
                 "cross entropy vocab " << vocab << ", padded_vocab " << padded_vocab);
  launch_gradient(dlogits, logits, lse, targets, rows, 0, vocab, padded_vocab, scale, true, stream);
}

void vocab_shard_max(float* row_max, const float* logits, int64_t rows, int64_t real_cols,
                     int64_t shard_cols, cudaStream_t stream) {
  launch_shard_max(row_max, logits, rows, real_cols, shard_cols, stream);
}

void vocab_shard_max(float* row_max, const __nv_bfloat16* logits, int64_t rows, int64_t real_cols,
                     int64_t shard_cols, cudaStream_t stream) {
  launch_shard_max(row_max, logits, rows, real_cols, shard_cols, stream);
}

void vocab_shard_sum_exp(float* row_sum, const float* logits, const float* row_max, int64_t rows,
                         int64_t real_cols, int64_t shard_cols, cudaStream_t stream) {
  launch_shard_sum_exp(row_sum, logits, row_max, rows, real_cols, shard_cols, stream);
}

void vocab_shard_sum_exp(float* row_sum, const __nv_bfloat16* logits, const float* row_max,
                         int64_t rows, int64_t real_cols, int64_t shard_cols, cudaStream_t stream) {
  launch_shard_sum_exp(row_sum, logits, row_max, rows, real_cols, shard_cols, stream);
}

void vocab_shard_target_logit(float* target_logit, const float* logits, const int32_t* targets,
                              int64_t rows, int64_t vocab_start, int64_t real_cols,
                              int64_t shard_cols, cudaStream_t stream) {
  launch_shard_target_logit(target_logit, logits, targets, rows, vocab_start, real_cols, shard_cols,
                            stream);
}

void vocab_shard_target_logit(float* target_logit, const __nv_bfloat16* logits,
                              const int32_t* targets, int64_t rows, int64_t vocab_start,
                              int64_t real_cols, int64_t shard_cols, cudaStream_t stream) {
  launch_shard_target_logit(target_logit, logits, targets, rows, vocab_start, real_cols, shard_cols,
                            stream);
}

void vocab_shard_cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                                        const int32_t* targets, int64_t rows, int64_t vocab_start,
                                        int64_t real_cols, int64_t shard_cols, float scale,
                                        cudaStream_t stream) {
  check_shard(real_cols, shard_cols);
  launch_gradient(dlogits, logits, lse, targets, rows, vocab_start, real_cols, shard_cols, scale,
                  false, stream);
}

void vocab_shard_cross_entropy_backward(__nv_bfloat16* dlogits, const __nv_bfloat16* logits,
                                        const float* lse, const int32_t* targets, int64_t rows,
                                        int64_t vocab_start, int64_t real_cols, int64_t shard_cols,
                                        float scale, cudaStream_t stream) {
  check_shard(real_cols, shard_cols);
  launch_gradient(dlogits, logits, lse, targets, rows, vocab_start, real_cols, shard_cols, scale,
                  false, stream);
}

}  // namespace runtime::cuda
