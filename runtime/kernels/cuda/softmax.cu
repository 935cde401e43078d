// Causal softmax kernels: one thread block per score row, reductions in a fixed order
// (per-thread strided partials, warp butterfly, warps combined in index order), so results
// are bit-identical from run to run. The last pass reads and writes each element in one thread,
// after the reductions' barriers (so the kernels may run in place); columns left of a sliding
// window or before the row's document start are written as 0, like those above the diagonal.
#include <algorithm>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/softmax.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

constexpr int kMaxRowThreads = 256;  // threads of the block that handles one row

// The first column the query of `row` (head row / T, position i = row % T) sees: the later of
// its window's first, i - window + 1 (Note [Sliding window] in runtime/op_args.h), and its
// document's start (Note [Document masking]); 0 with neither.
__device__ __forceinline__ int64_t first_visible(int64_t row, int64_t T,
                                                 const cpu::SoftmaxMask& mask) {
  const int64_t i = row % T;
  const int64_t window_first = mask.window > 0 && i >= mask.window ? i - mask.window + 1 : 0;
  if (mask.document_starts == nullptr) return window_first;
  const int64_t sample = row / T / mask.heads_per_sample;
  const int64_t start = mask.document_starts[i * mask.micro_batch + sample];
  return start > window_first ? start : window_first;
}

// One block per row of the (batch_heads * T) rows; row % T is the query position i, which sees
// columns first..i. Each thread takes kWidth consecutive entries per access (Note [Vector
// access]); the reductions start at the pack holding column first (pack 0 with no window or
// documents).
template <typename Element, int kWidth>
__global__ void causal_softmax_forward_kernel(Element* probs, const Element* scores, int64_t T,
                                              cpu::SoftmaxMask mask) {
  __shared__ float partials[kMaxRowThreads / kWarpThreads];
  const int64_t row = blockIdx.x;
  const int64_t i = row % T;
  const int64_t first = first_visible(row, T, mask);
  const Element* x = scores + row * T;
  Element* p = probs + row * T;                                      // may be x itself
  const int64_t lane0 = static_cast<int64_t>(threadIdx.x) * kWidth;  // the thread's first pack
  const int64_t start = first / kWidth * kWidth + lane0;
  const int64_t step = static_cast<int64_t>(blockDim.x) * kWidth;
  float v[kWidth] = {};

  float local_max = -INFINITY;
  for (int64_t j = start; j <= i; j += step) {
    load_pack<kWidth>(x + j, v);
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      if (j + k >= first && j + k <= i) local_max = fmaxf(local_max, v[k]);
  }
  const float row_max = block_reduce(local_max, partials, MaxOp{});

  float local_sum = 0.f;
  for (int64_t j = start; j <= i; j += step) {
    load_pack<kWidth>(x + j, v);
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      if (j + k >= first && j + k <= i) local_sum += expf(v[k] - row_max);
  }
  const float inv_sum = 1.f / block_reduce(local_sum, partials, SumOp{});

  for (int64_t j = lane0; j < T; j += step) {
    if (j + kWidth > first && j <= i) load_pack<kWidth>(x + j, v);
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      v[k] = j + k >= first && j + k <= i ? expf(v[k] - row_max) * inv_sum : 0.f;
    store_pack<kWidth>(p + j, v);
  }
}

template <typename Element, int kWidth>
__global__ void causal_softmax_backward_kernel(Element* dscores, const Element* dprobs,
                                               const Element* probs, int64_t T,
                                               cpu::SoftmaxMask mask) {
  __shared__ float partials[kMaxRowThreads / kWarpThreads];
  const int64_t row = blockIdx.x;
  const int64_t i = row % T;
  const int64_t first = first_visible(row, T, mask);
  const Element* dp = dprobs + row * T;
  const Element* p = probs + row * T;
  Element* ds = dscores + row * T;                                   // may be dp itself
  const int64_t lane0 = static_cast<int64_t>(threadIdx.x) * kWidth;  // the thread's first pack
  const int64_t start = first / kWidth * kWidth + lane0;
  const int64_t step = static_cast<int64_t>(blockDim.x) * kWidth;
  float dv[kWidth] = {}, pv[kWidth] = {};

  float local_dot = 0.f;
  for (int64_t j = start; j <= i; j += step) {
    load_pack<kWidth>(dp + j, dv);
    load_pack<kWidth>(p + j, pv);
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      if (j + k >= first && j + k <= i) local_dot += dv[k] * pv[k];
  }
  const float row_dot = block_reduce(local_dot, partials, SumOp{});

  for (int64_t j = lane0; j < T; j += step) {
    if (j + kWidth > first && j <= i) {
      load_pack<kWidth>(dp + j, dv);
      load_pack<kWidth>(p + j, pv);
    }
#pragma unroll
    for (int k = 0; k < kWidth; ++k)
      dv[k] = j + k >= first && j + k <= i ? pv[k] * (dv[k] - row_dot) : 0.f;
    store_pack<kWidth>(ds + j, dv);
  }
}

// Threads per row block: the row's accesses of `width` entries rounded up to whole warps, at
// most kMaxRowThreads.
template <int kWidth>
int row_threads(int64_t T, std::integral_constant<int, kWidth>) {
  const int64_t accesses = (T + kWidth - 1) / kWidth;
  const int64_t warps = (accesses + kWarpThreads - 1) / kWarpThreads;
  return static_cast<int>(std::min<int64_t>(warps * kWarpThreads, kMaxRowThreads));
}

// Whether rows of T entries take packed accesses (Note [Vector access]): T a multiple of the
// pack, so every row starts aligned when the tensors do.
template <typename Element>
bool packed_rows(int64_t T, std::initializer_list<const Element*> tensors) {
  if (T % kPack<Element> != 0) return false;
  for (const Element* t : tensors)
    if (!aligned_16(t)) return false;
  return true;
}

// Grid of one block per row; false when there is nothing to do.
bool row_grid(int64_t batch_heads, int64_t T, const cpu::SoftmaxMask& mask, unsigned* blocks) {
  TRAINER_ASSERT(batch_heads >= 0 && T >= 0, "causal softmax of " << batch_heads << " x " << T);
  TRAINER_ASSERT(mask.window >= 0, "causal softmax window " << mask.window << " is negative");
  TRAINER_ASSERT(mask.micro_batch >= 1 && mask.micro_batch * mask.heads_per_sample == batch_heads,
                 "causal softmax of " << batch_heads << " heads: micro_batch " << mask.micro_batch
                                      << " samples of " << mask.heads_per_sample << " heads");
  const int64_t rows = batch_heads * T;
  TRAINER_ASSERT(rows <= INT_MAX, "causal softmax of " << rows << " rows exceeds the grid");
  *blocks = static_cast<unsigned>(rows);
  return rows > 0;
}

template <typename Element>
void launch_forward(Element* probs, const Element* scores, int64_t batch_heads, int64_t T,
                    const cpu::SoftmaxMask& mask, cudaStream_t stream) {
  unsigned blocks = 0;
  if (!row_grid(batch_heads, T, mask, &blocks)) return;
  with_pack_width<Element>(packed_rows<Element>(T, {probs, scores}), [&](auto width) {
    causal_softmax_forward_kernel<Element, decltype(width)::value>
        <<<blocks, row_threads(T, width), 0, stream>>>(probs, scores, T, mask);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <typename Element>
void launch_backward(Element* dscores, const Element* dprobs, const Element* probs,
                     int64_t batch_heads, int64_t T, const cpu::SoftmaxMask& mask,
                     cudaStream_t stream) {
  unsigned blocks = 0;
  if (!row_grid(batch_heads, T, mask, &blocks)) return;
  with_pack_width<Element>(packed_rows<Element>(T, {dscores, dprobs, probs}), [&](auto width) {
    causal_softmax_backward_kernel<Element, decltype(width)::value>
        <<<blocks, row_threads(T, width), 0, stream>>>(dscores, dprobs, probs, T, mask);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void causal_softmax_forward(float* probs, const float* scores, int64_t batch_heads, int64_t T,
                            const cpu::SoftmaxMask& mask, cudaStream_t stream) {
  launch_forward(probs, scores, batch_heads, T, mask, stream);
}

void causal_softmax_forward(__nv_bfloat16* probs, const __nv_bfloat16* scores, int64_t batch_heads,
                            int64_t T, const cpu::SoftmaxMask& mask, cudaStream_t stream) {
  launch_forward(probs, scores, batch_heads, T, mask, stream);
}

void causal_softmax_backward(float* dscores, const float* dprobs, const float* probs,
                             int64_t batch_heads, int64_t T, const cpu::SoftmaxMask& mask,
                             cudaStream_t stream) {
  launch_backward(dscores, dprobs, probs, batch_heads, T, mask, stream);
}

void causal_softmax_backward(__nv_bfloat16* dscores, const __nv_bfloat16* dprobs,
                             const __nv_bfloat16* probs, int64_t batch_heads, int64_t T,
                             const cpu::SoftmaxMask& mask, cudaStream_t stream) {
  launch_backward(dscores, dprobs, probs, batch_heads, T, mask, stream);
}

}  // namespace runtime::cuda
