// The layout and merge kernels of ring attention (Note [Flash blocks]): grid-stride loops, one
// output element (merge: one row of a head) per thread, bf16 through float.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/flash_block.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

// The (row, sample, kv head) positions of a [s, b, h] tensor: rows * B * heads / group_size
// (Note [Grouped-query attention]); query positions for group_size 1.
int64_t group_positions(const cpu::FlashRows& sizes) {
  TRAINER_ASSERT(
      sizes.rows >= 0 && sizes.micro_batch >= 1 && sizes.heads >= 1 && sizes.head_dim >= 1 &&
          sizes.group_size >= 1 && sizes.heads % sizes.group_size == 0,
      "flash block layout: rows " << sizes.rows << ", micro_batch " << sizes.micro_batch
                                  << ", heads " << sizes.heads << ", head_dim " << sizes.head_dim
                                  << ", group_size " << sizes.group_size);
  return sizes.rows * sizes.micro_batch * (sizes.heads / sizes.group_size);
}

// kv element i: group position i / 2D, feature i % 2D of k then v, at r*D + i % 2D of the
// group's (r + 2) * D features in qkv.
template <class T>
__global__ void pack_kv_kernel(T* kv, const T* qkv, int64_t count, int64_t head_dim,
                               int64_t group_size) {
  const int64_t width = 2 * head_dim, group = (group_size + 2) * head_dim;
  for (int64_t i = grid_start<int64_t>(); i < count; i += grid_step<int64_t>()) {
    const int64_t position = i / width, feature = i % width;
    kv[i] = qkv[position * group + group_size * head_dim + feature];
  }
}

// One thread per lse row (b, h, t), over the row's D features.
__global__ void flash_merge_kernel(float* ctx, float* lse, const float* ctx_block,
                                   const float* lse_block, int64_t rows_total, int64_t rows,
                                   int64_t batch_heads, int64_t head_dim) {
  for (int64_t row = grid_start<int64_t>(); row < rows_total; row += grid_step<int64_t>()) {
    const float a = lse[row], b = lse_block[row];
    if (b == -INFINITY) continue;  // the block adds nothing (both -inf included)
    const int64_t bh = row / rows, t = row % rows, at = (t * batch_heads + bh) * head_dim;
    if (a == -INFINITY) {
      for (int64_t d = 0; d < head_dim; ++d) ctx[at + d] = ctx_block[at + d];
      lse[row] = b;
      continue;
    }
    const float merged = fmaxf(a, b) + log1pf(expf(-fabsf(a - b)));
    const float keep = expf(a - merged), take = expf(b - merged);
    for (int64_t d = 0; d < head_dim; ++d)
      ctx[at + d] = keep * ctx[at + d] + take * ctx_block[at + d];
    lse[row] = merged;
  }
}

// dqkv element i: group position i / (r+2)D; features [0, rD) from the group's query heads'
// dq, [rD, (r+2)D) from dkv.
template <class T>
__global__ void assemble_qkv_grad_kernel(T* dqkv, const float* dq, const float* dkv, int64_t count,
                                         int64_t head_dim, int64_t group_size) {
  const int64_t queries = group_size * head_dim, width = queries + 2 * head_dim;
  for (int64_t i = grid_start<int64_t>(); i < count; i += grid_step<int64_t>()) {
    const int64_t position = i / width, feature = i % width;
    const float value = feature < queries ? dq[position * queries + feature]
                                          : dkv[position * 2 * head_dim + feature - queries];
    dqkv[i] = from_float<T>(value);
  }
}

template <class T>
void launch_pack_kv(T* kv, const T* qkv, const cpu::FlashRows& sizes, cudaStream_t stream) {
  const int64_t count = group_positions(sizes) * 2 * sizes.head_dim;
  if (count == 0) return;
  pack_kv_kernel<T>
      <<<grid_for(count), kThreads, 0, stream>>>(kv, qkv, count, sizes.head_dim, sizes.group_size);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_assemble(T* dqkv, const float* dq, const float* dkv, const cpu::FlashRows& sizes,
                     cudaStream_t stream) {
  const int64_t count = group_positions(sizes) * (sizes.group_size + 2) * sizes.head_dim;
  if (count == 0) return;
  assemble_qkv_grad_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(
      dqkv, dq, dkv, count, sizes.head_dim, sizes.group_size);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void pack_kv(float* kv, const float* qkv, const cpu::FlashRows& sizes, cudaStream_t stream) {
  launch_pack_kv(kv, qkv, sizes, stream);
}
void pack_kv(__nv_bfloat16* kv, const __nv_bfloat16* qkv, const cpu::FlashRows& sizes,
             cudaStream_t stream) {
  launch_pack_kv(kv, qkv, sizes, stream);
}

void flash_merge(float* ctx, float* lse, const float* ctx_block, const float* lse_block,
                 const cpu::FlashRows& sizes, cudaStream_t stream) {
  group_positions(sizes);                                                   // checks the sizes
  const int64_t rows_total = sizes.rows * sizes.micro_batch * sizes.heads;  // of lse
  if (rows_total == 0) return;
  flash_merge_kernel<<<grid_for(rows_total), kThreads, 0, stream>>>(
      ctx, lse, ctx_block, lse_block, rows_total, sizes.rows, sizes.micro_batch * sizes.heads,
      sizes.head_dim);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

void assemble_qkv_grad(float* dqkv, const float* dq, const float* dkv, const cpu::FlashRows& sizes,
                       cudaStream_t stream) {
  launch_assemble(dqkv, dq, dkv, sizes, stream);
}
void assemble_qkv_grad(__nv_bfloat16* dqkv, const float* dq, const float* dkv,
                       const cpu::FlashRows& sizes, cudaStream_t stream) {
  launch_assemble(dqkv, dq, dkv, sizes, stream);
}

}  // namespace runtime::cuda
