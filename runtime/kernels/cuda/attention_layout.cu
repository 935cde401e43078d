// Head split/merge kernels: one thread per element of the per-head (B, H, T, D) side, in a
// grid-stride loop; the (T, B, H, D) or grouped (T, B, G, (r+2) D) side is addressed from the
// same coordinates, and k, v (B, G, T, D) by the first query head of each group.
// Pure copies: exact in every dtype and deterministic.
#include <algorithm>

#include "runtime/error.h"
#include "runtime/kernels/cuda/attention_layout.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"

namespace runtime::cuda {
namespace {

using ::runtime::cuda::device::grid_start;
using ::runtime::cuda::device::grid_step;
using ::runtime::cuda::device::kThreads;
using ::runtime::cuda::device::with_index_type;

constexpr int64_t kMaxBlocks = int64_t{1} << 16;  // the grid-stride loop covers the rest

// Coordinates of element `index` of a (B, H, T, D) tensor, and the offset of the same
// (t, b, h) head slot in a (T, B, H, width) tensor whose head slots hold `width` values.
// Index: Note [Index width]; the (T, B, H, width) offsets stay below 3 * n.
template <class Index>
struct HeadIndex {
  Index d;
  Index token_slot;  // offset of head slot (t, b, h) in the (T, B, H, width) tensor
};

template <class Index>
__device__ inline HeadIndex<Index> head_index(Index index, Index T, Index B, Index H, Index D,
                                              Index width) {
  const Index d = index % D;
  Index rest = index / D;
  const Index t = rest % T;
  rest /= T;
  const Index h = rest % H;
  const Index b = rest / H;
  return {d, ((t * B + b) * H + h) * width};
}

// Where element `index` of q (B, H, T, D) lives in a grouped qkv (Note [Grouped-query
// attention]), r query heads per kv head: its element of the (T, B, G, (r+2) D) tensor
// (member * D into its group), and, for the group's first query head (member 0), the element
// of its kv head in k and v (B, G, T, D).
template <class Index>
struct QkvIndex {
  Index group_element;  // feature d of (t, b, g)'s group
  Index member;         // h % r
  Index kv_element;     // of (b, g, t, d)
};

template <class Index>
__device__ inline QkvIndex<Index> qkv_index(Index index, Index T, Index B, Index H, Index D,
                                            Index r) {
  const Index d = index % D;
  Index rest = index / D;
  const Index t = rest % T;
  rest /= T;
  const Index h = rest % H;
  const Index b = rest / H;
  const Index G = H / r, g = h / r;
  return {((t * B + b) * G + g) * (r + 2) * D + d, h % r, ((b * G + g) * T + t) * D + d};
}

template <typename Element, class Index>
__global__ void split_qkv_heads_kernel(Element* q, Element* k, Element* v, const Element* qkv,
                                       Index T, Index B, Index H, Index D, Index r) {
  const Index n = B * H * T * D;
  for (Index index = grid_start<Index>(); index < n; index += grid_step<Index>()) {
    const QkvIndex<Index> at = qkv_index(index, T, B, H, D, r);
    const Element* src = qkv + at.group_element;
    q[index] = src[at.member * D];
    if (at.member != 0) continue;
    k[at.kv_element] = src[r * D];
    v[at.kv_element] = src[(r + 1) * D];
  }
}

template <typename Element, class Index>
__global__ void merge_qkv_heads_kernel(Element* dqkv, const Element* dq, const Element* dk,
                                       const Element* dv, Index T, Index B, Index H, Index D,
                                       Index r) {
  const Index n = B * H * T * D;
  for (Index index = grid_start<Index>(); index < n; index += grid_step<Index>()) {
    const QkvIndex<Index> at = qkv_index(index, T, B, H, D, r);
    Element* dst = dqkv + at.group_element;
    dst[at.member * D] = dq[index];
    if (at.member != 0) continue;
    dst[r * D] = dk[at.kv_element];
    dst[(r + 1) * D] = dv[at.kv_element];
  }
}

template <typename Element, class Index>
__global__ void merge_heads_kernel(Element* ctx, const Element* ctx_heads, Index T, Index B,
                                   Index H, Index D) {
  const Index n = B * H * T * D;
  for (Index index = grid_start<Index>(); index < n; index += grid_step<Index>()) {
    const HeadIndex<Index> at = head_index(index, T, B, H, D, D);
    ctx[at.token_slot + at.d] = ctx_heads[index];
  }
}

template <typename Element, class Index>
__global__ void split_heads_kernel(Element* ctx_heads, const Element* ctx, Index T, Index B,
                                   Index H, Index D) {
  const Index n = B * H * T * D;
  for (Index index = grid_start<Index>(); index < n; index += grid_step<Index>()) {
    const HeadIndex<Index> at = head_index(index, T, B, H, D, D);
    ctx_heads[index] = ctx[at.token_slot + at.d];
  }
}

// Checks r >= 1 divides H.
void check_group(int64_t H, int64_t group_size) {
  TRAINER_ASSERT(group_size >= 1 && H % group_size == 0,
                 "attention layout group_size " << group_size << " must divide H=" << H);
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
                      int64_t H, int64_t D, int64_t r, cudaStream_t stream) {
  check_group(H, r);
  const unsigned blocks = layout_blocks(T, B, H, D);
  if (blocks == 0) return;
  with_index_type(3 * T * B * H * D, [&](auto index) {  // qkv holds (r + 2) / r <= 3 times q
    using Index = decltype(index);
    split_qkv_heads_kernel<Element, Index><<<blocks, kThreads, 0, stream>>>(
        q, k, v, qkv, static_cast<Index>(T), static_cast<Index>(B), static_cast<Index>(H),
        static_cast<Index>(D), static_cast<Index>(r));
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_merge_qkv(Element* dqkv, const Element* dq, const Element* dk, const Element* dv,
                      int64_t T, int64_t B, int64_t H, int64_t D, int64_t r, cudaStream_t stream) {
  check_group(H, r);
  const unsigned blocks = layout_blocks(T, B, H, D);
  if (blocks == 0) return;
  with_index_type(3 * T * B * H * D, [&](auto index) {
    using Index = decltype(index);
    merge_qkv_heads_kernel<Element, Index><<<blocks, kThreads, 0, stream>>>(
        dqkv, dq, dk, dv, static_cast<Index>(T), static_cast<Index>(B), static_cast<Index>(H),
        static_cast<Index>(D), static_cast<Index>(r));
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_merge_heads(Element* ctx, const Element* ctx_heads, int64_t T, int64_t B, int64_t H,
                        int64_t D, cudaStream_t stream) {
  const unsigned blocks = layout_blocks(T, B, H, D);
  if (blocks == 0) return;
  with_index_type(3 * T * B * H * D, [&](auto index) {
    using Index = decltype(index);
    merge_heads_kernel<Element, Index><<<blocks, kThreads, 0, stream>>>(
        ctx, ctx_heads, static_cast<Index>(T), static_cast<Index>(B), static_cast<Index>(H),
        static_cast<Index>(D));
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_split_heads(Element* ctx_heads, const Element* ctx, int64_t T, int64_t B, int64_t H,
                        int64_t D, cudaStream_t stream) {
  const unsigned blocks = layout_blocks(T, B, H, D);
  if (blocks == 0) return;
  with_index_type(3 * T * B * H * D, [&](auto index) {
    using Index = decltype(index);
    split_heads_kernel<Element, Index><<<blocks, kThreads, 0, stream>>>(
        ctx_heads, ctx, static_cast<Index>(T), static_cast<Index>(B), static_cast<Index>(H),
        static_cast<Index>(D));
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void split_qkv_heads(float* q, float* k, float* v, const float* qkv, int64_t T, int64_t B,
                     int64_t H, int64_t D, int64_t group_size, cudaStream_t stream) {
  launch_split_qkv(q, k, v, qkv, T, B, H, D, group_size, stream);
}

void split_qkv_heads(__nv_bfloat16* q, __nv_bfloat16* k, __nv_bfloat16* v, const __nv_bfloat16* qkv,
                     int64_t T, int64_t B, int64_t H, int64_t D, int64_t group_size,
                     cudaStream_t stream) {
  launch_split_qkv(q, k, v, qkv, T, B, H, D, group_size, stream);
}

void merge_qkv_heads(float* dqkv, const float* dq, const float* dk, const float* dv, int64_t T,
                     int64_t B, int64_t H, int64_t D, int64_t group_size, cudaStream_t stream) {
  launch_merge_qkv(dqkv, dq, dk, dv, T, B, H, D, group_size, stream);
}

void merge_qkv_heads(__nv_bfloat16* dqkv, const __nv_bfloat16* dq, const __nv_bfloat16* dk,
                     const __nv_bfloat16* dv, int64_t T, int64_t B, int64_t H, int64_t D,
                     int64_t group_size, cudaStream_t stream) {
  launch_merge_qkv(dqkv, dq, dk, dv, T, B, H, D, group_size, stream);
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
