// Helpers of the row normalizations (layernorm.cu, rmsnorm.cu): whether a row takes packed
// accesses, the grid of one block per row, the row chunks of the weight gradients' partial sums,
// which depend on the row count only (so the sums' order is a function of the shapes), a
// thread's part of a row statistic, and the packs the input gradients' kernels read at a channel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "runtime/kernels/cuda/device_common.cuh"

namespace runtime::cuda::norm_rows {

constexpr int64_t kMaxRowChunks = 256;  // row chunks of the weight gradients' partial sums

// Whether rows of C channels take packed accesses (Note [Vector access]).
template <class T>
bool packed_rows(int64_t C, std::initializer_list<const T*> tensors) {
  if (C % device::kPack<T> != 0) return false;
  for (const T* t : tensors)
    if (!device::aligned_16(t)) return false;
  return true;
}

inline unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(std::min(rows, device::kMaxBlocks));
}

// Rows per chunk of the weight gradients' partial sums: a function of `rows` only.
inline int64_t chunk_rows_for(int64_t rows) {
  return std::max<int64_t>(1, (rows + kMaxRowChunks - 1) / kMaxRowChunks);
}
inline int64_t chunks_for(int64_t rows) {
  const int64_t chunk_rows = chunk_rows_for(rows);
  return (rows + chunk_rows - 1) / chunk_rows;
}

// f(c) for the first channel c of each of this thread's packs of a row of C channels (Note
// [Vector access]), in channel order: the loop over a row of every kernel here.
template <int kWidth, class F>
__device__ __forceinline__ void for_thread_packs(int64_t C, F&& f) {
  constexpr int64_t kStep = int64_t{device::kThreads} * kWidth;
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * kWidth; c < C; c += kStep) f(c);
}

// This thread's sum of f(value) over its packs of `row`, in channel order: a row statistic's
// part before the block's sum.
template <int kWidth, class T, class F>
__device__ __forceinline__ float thread_row_sum(const T* row, int64_t C, F f) {
  float sum = 0.f, x[kWidth];
  for_thread_packs<kWidth>(C, [&](int64_t c) {
    device::load_pack<kWidth>(row + c, x);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) sum += f(x[k]);
  });
  return sum;
}

// The packs of channels [c, c + kWidth) that an input gradient reads: the row's input `in`, its
// output gradient `d_out` and the weight.
template <int kWidth, class T>
__device__ __forceinline__ void load_dinp_packs(const T* in, const T* d_out, const T* weight,
                                                int64_t c, float* x, float* dy, float* w) {
  device::load_pack<kWidth>(in + c, x);
  device::load_pack<kWidth>(d_out + c, dy);
  device::load_pack<kWidth>(weight + c, w);
}

}  // namespace runtime::cuda::norm_rows
