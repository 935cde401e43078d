// Head split/merge kernels: one thread per element of the per-head (B, H, T, D) side, in a
// grid-stride loop; the (T, B, H, [3,] D) side is addressed from the same coordinates.
// Pure copies: exact in every dtype and deterministic.
#include <algorithm>

#include "runtime/error.h"
#include "runtime/kernels/cuda/attention_layout.h"
#include "runtime/kernels/cuda/cuda_check.h"

namespace runtime::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 16;  // the grid-stride loop covers the rest

// Coordinates of element `index` of a (B, H, T, D) tensor, and the offset of the same
// (t, b, h) head slot in a (T, B, H, width) tensor whose head slots hold `width` values.
struct HeadIndex {
  int64_t d;
  int64_t token_slot;  // offset of head slot (t, b, h) in the (T, B, H, width) tensor
};

__device__ inline HeadIndex head_index(int64_t index, int64_t T, int64_t B, int64_t H, int64_t D,
                                       int64_t width) {
  const int64_t d = index % D;
  int64_t rest = index / D;
  const int64_t t = rest % T;
  rest /= T;
  const int64_t h = rest % H;
  const int64_t b = rest / H;
  return {d, ((t * B + b) * H + h) * width};
}

__device__ inline int64_t grid_start() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t grid_step() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

template <typename Element>
__global__ void split_qkv_heads_kernel(Element* q, Element* k, Element* v, const Element* qkv,
                                       int64_t T, int64_t B, int64_t H, int64_t D) {
  const int64_t n = B * H * T * D;
  for (int64_t index = grid_start(); index < n; index += grid_step()) {
    const HeadIndex at = head_index(index, T, B, H, D, 3 * D);
    const Element* src = qkv + at.token_slot + at.d;
    q[index] = src[0];
    k[index] = src[D];
    v[index] = src[2 * D];
  }
}

template <typename Element>
__global__ void merge_qkv_heads_kernel(Element* dqkv, const Element* dq, const Element* dk,
                                       const Element* dv, int64_t T, int64_t B, int64_t H,
                                       int64_t D) {
  const int64_t n = B * H * T * D;
  for (int64_t index = grid_start(); index < n; index += grid_step()) {
    const HeadIndex at = head_index(index, T, B, H, D, 3 * D);
    Element* dst = dqkv + at.token_slot + at.d;
    dst[0] = dq[index];
    dst[D] = dk[index];
    dst[2 * D] = dv[index];
  }
}

template <typename Element>
__global__ void merge_heads_kernel(Element* ctx, const Element* ctx_heads, int64_t T, int64_t B,
                                   int64_t H, int64_t D) {
  const int64_t n = B * H * T * D;
  for (int64_t index = grid_start(); index < n; index += grid_step()) {
    const HeadIndex at = head_index(index, T, B, H, D, D);
    ctx[at.token_slot + at.d] = ctx_heads[index];
  }
}

template <typename Element>
__global__ void split_heads_kernel(Element* ctx_heads, const Element* ctx, int64_t T, int64_t B,
                                   int64_t H, int64_t D) {
  const int64_t n = B * H * T * D;
  for (int64_t index = grid_start(); index < n; index += grid_step()) {
    const HeadIndex at = head_index(index, T, B, H, D, D);
    ctx_heads[index] = ctx[at.token_slot + at.d];
  }
}

// Blocks for a grid-stride loop over the T*B*H*D elements; 0 when there is nothing to do.
unsigned layout_blocks(int64_t T, int64_t B, int64_t H, int64_t D) {
  TRAINER_ASSERT(T >= 0 && B >= 0 && H >= 0 && D >= 0,
                 "attention layout T=" << T << " B=" << B << " H=" << H << " D=" << D);
  const int64_t n = T * B * H * D;
  return static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}

template <typename Element>
void launch_split_qkv(Element* q, Element* k, Element* v, const Element* qkv, int64_t T, int64_t B,
                      int64_t H, int64_t D, cudaStream_t stream) {
  const unsigned blocks = layout_blocks(T, B, H, D);
  if (blocks == 0) return;
  split_qkv_heads_kernel<<<blocks, kThreads, 0, stream>>>(q, k, v, qkv, T, B, H, D);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_merge_qkv(Element* dqkv, const Element* dq, const Element* dk, const Element* dv,
                      int64_t T, int64_t B, int64_t H, int64_t D, cudaStream_t stream) {
  const unsigned blocks = layout_blocks(T, B, H, D);
  if (blocks == 0) return;
  merge_qkv_heads_kernel<<<blocks, kThreads, 0, stream>>>(dqkv, dq, dk, dv, T, B, H, D);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_merge_heads(Element* ctx, const Element* ctx_heads, int64_t T, int64_t B, int64_t H,
                        int64_t D, cudaStream_t stream) {
  const unsigned blocks = layout_blocks(T, B, H, D);
  if (blocks == 0) return;
  merge_heads_kernel<<<blocks, kThreads, 0, stream>>>(ctx, ctx_heads, T, B, H, D);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_split_heads(Element* ctx_heads, const Element* ctx, int64_t T, int64_t B, int64_t H,
                        int64_t D, cudaStream_t stream) {
  const unsigned blocks = layout_blocks(T, B, H, D);
  if (blocks == 0) return;
  split_heads_kernel<<<blocks, kThreads, 0, stream>>>(ctx_heads, ctx, T, B, H, D);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void split_qkv_heads(float* q, float* k, float* v, const float* qkv, int64_t T, int64_t B,
                     int64_t H, int64_t D, cudaStream_t stream) {
  launch_split_qkv(q, k, v, qkv, T, B, H, D, stream);
}

void split_qkv_heads(__nv_bfloat16* q, __nv_bfloat16* k, __nv_bfloat16* v, const __nv_bfloat16* qkv,
                     int64_t T, int64_t B, int64_t H, int64_t D, cudaStream_t stream) {
  launch_split_qkv(q, k, v, qkv, T, B, H, D, stream);
}

void merge_qkv_heads(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t T,
                     int64_t B, int64_t H, int64_t D, cudaStream_t stream) {
  launch_merge_qkv(dqkv, dq, dk, dv, T, B, H, D, stream);
}

void merge_qkv_heads(__nv_bfloat16* dqkv, const __nv_bfloat16* dq, const __nv_bfloat16* dk,
                     const __nv_bfloat16* dv, int64_t T, int64_t B, int64_t H, int64_t D,
                     cudaStream_t stream) {
  launch_merge_qkv(dqkv, dq, dk, dv, T, B, H, D, stream);
}

void merge_heads(float* ctx, const float* ctx_heads, int64_t T, int64_t B, int64_t H, int64_t D,
                 cudaStream_t stream) {
  launch_merge_heads(ctx, ctx_heads, T, B, H, D, stream);
}

void merge_heads(__nv_bfloat16* ctx, const __nv_bfloat16* ctx_heads, int64_t T, int64_t B,
                 int64_t H, int64_t D, cudaStream_t stream) {
  launch_merge_heads(ctx, ctx_heads, T, B, H, D, stream);
}

void split_heads(float* ctx_heads, const float* ctx, int64_t T, int64_t B, int64_t H, int64_t D,
                 cudaStream_t stream) {
  launch_split_heads(ctx_heads, ctx, T, B, H, D, stream);
}

void split_heads(__nv_bfloat16* ctx_heads, const __nv_bfloat16* ctx, int64_t T, int64_t B,
                 int64_t H, int64_t D, cudaStream_t stream) {
  launch_split_heads(ctx_heads, ctx, T, B, H, D, stream);
}

}  // namespace runtime::cuda
