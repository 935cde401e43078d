// RMS normalization: one block per row, the mean square in fp32 reduced in a fixed order.
// Backward: dinp by rows as in forward; dweight as per-(row chunk, channel) partial sums in
// double in scratch, then summed over chunks in order: deterministic, no atomics.
#include <algorithm>
#include <initializer_list>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/rmsnorm.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

constexpr int64_t kMaxRowChunks = 256;  // row chunks of the dweight partial sums

// x * rstd rounded to the activation type (Note [RMSNorm rounding]; the identity for f32).
template <class T>
__device__ __forceinline__ float normalized(float x, float s) {
  return to_float(from_float<T>(x * s));
}

// kWidth: Note [Vector access]; C is a multiple of it.
template <class T, int kWidth>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* weight, int64_t rows,
                           int64_t C, float eps) {
  __shared__ float partials[kThreads / kWarpThreads];
  const int64_t first = static_cast<int64_t>(threadIdx.x) * kWidth;
  constexpr int64_t kStep = int64_t{kThreads} * kWidth;
  float x[kWidth], w[kWidth];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = inp + r * C;
    float square_sum = 0.f;
    for (int64_t c = first; c < C; c += kStep) {
      load_pack<kWidth>(in + c, x);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) square_sum += x[k] * x[k];
    }
    const float mean_square = block_reduce(square_sum, partials, SumOp{}) / static_cast<float>(C);
    const float s = 1.f / sqrtf(mean_square + eps);
    T* y = out + r * C;
    for (int64_t c = first; c < C; c += kStep) {
      load_pack<kWidth>(in + c, x);
      load_pack<kWidth>(weight + c, w);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) x[k] = w[k] * normalized<T>(x[k], s);
      store_pack<kWidth>(y + c, x);
    }
    if (threadIdx.x == 0) rstd[r] = s;
  }
}

// dinp += rstd * (g - xhat * mean(g * xhat)), g = dout * weight, xhat = inp * rstd.
template <class T, int kWidth>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* rstd,
                        int64_t rows, int64_t C) {
  __shared__ float partials[kThreads / kWarpThreads];
  const int64_t first = static_cast<int64_t>(threadIdx.x) * kWidth;
  constexpr int64_t kStep = int64_t{kThreads} * kWidth;
  float x[kWidth], dy[kWidth], w[kWidth], dx[kWidth];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = inp + r * C;
    const T* d_out = dout + r * C;
    const float s = rstd[r];
    float g_xhat_sum = 0.f;
    for (int64_t c = first; c < C; c += kStep) {
      load_pack<kWidth>(in + c, x);
      load_pack<kWidth>(d_out + c, dy);
      load_pack<kWidth>(weight + c, w);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) g_xhat_sum += (dy[k] * w[k]) * (x[k] * s);
    }
    const float b = block_reduce(g_xhat_sum, partials, SumOp{}) / static_cast<float>(C);
    T* d_in = dinp + r * C;
    for (int64_t c = first; c < C; c += kStep) {
      load_pack<kWidth>(in + c, x);
      load_pack<kWidth>(d_out + c, dy);
      load_pack<kWidth>(weight + c, w);
      load_pack<kWidth>(d_in + c, dx);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) dx[k] += (dy[k] * w[k] - (x[k] * s) * b) * s;
      store_pack<kWidth>(d_in + c, dx);
    }
  }
}

// partial_dw[chunk][c] = sum over the chunk's rows, in order, of dout * xhat (xhat rounded as
// the forward's). Grid: (channel blocks, row chunks).
template <class T>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_weight_partial_kernel(double* partial_dw, const T* dout, const T* inp,
                                  const float* rstd, int64_t rows, int64_t C, int64_t chunk_rows) {
  const int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (c >= C) return;
  const int64_t chunk = blockIdx.y;
  const int64_t r_begin = chunk * chunk_rows;
  const int64_t r_end = r_begin + chunk_rows < rows ? r_begin + chunk_rows : rows;
  double dw = 0.0;
  for (int64_t r = r_begin; r < r_end; ++r)
    dw += static_cast<double>(to_float(dout[r * C + c]) *
                              normalized<T>(to_float(inp[r * C + c]), rstd[r]));
  partial_dw[chunk * C + c] = dw;
}

// dweight[c] += sum over chunks in order of partial_dw[chunk][c].
__global__ void __launch_bounds__(kThreads)
    rmsnorm_weight_final_kernel(float* dweight, const double* partial_dw, int64_t chunks,
                                int64_t C) {
  const int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (c >= C) return;
  double dw = 0.0;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) dw += partial_dw[chunk * C + c];
  dweight[c] += static_cast<float>(dw);
}

// Whether rows of C channels take packed accesses (Note [Vector access]).
template <class T>
bool packed_rows(int64_t C, std::initializer_list<const T*> tensors) {
  if (C % kPack<T> != 0) return false;
  for (const T* t : tensors)
    if (!aligned_16(t)) return false;
  return true;
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(std::min(rows, kMaxBlocks));
}

// Rows per chunk of the dweight partial sums: a function of `rows` only.
int64_t chunk_rows_for(int64_t rows) {
  return std::max<int64_t>(1, (rows + kMaxRowChunks - 1) / kMaxRowChunks);
}
int64_t chunks_for(int64_t rows) {
  const int64_t chunk_rows = chunk_rows_for(rows);
  return (rows + chunk_rows - 1) / chunk_rows;
}

template <class T>
void launch_forward(T* out, float* rstd, const T* inp, const T* weight, int64_t rows, int64_t C,
                    float eps, cudaStream_t stream) {
  TRAINER_ASSERT(rows >= 0 && C > 0, "rmsnorm of " << rows << " rows of " << C << " channels");
  if (rows == 0) return;
  with_pack_width<T>(packed_rows<T>(C, {out, inp, weight}), [&](auto width) {
    rmsnorm_forward_kernel<T, decltype(width)::value>
        <<<row_grid(rows), kThreads, 0, stream>>>(out, rstd, inp, weight, rows, C, eps);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                     const float* rstd, int64_t rows, int64_t C, void* scratch,
                     cudaStream_t stream) {
  TRAINER_ASSERT(rows >= 0 && C > 0, "rmsnorm of " << rows << " rows of " << C << " channels");
  if (rows == 0) return;
  with_pack_width<T>(packed_rows<T>(C, {dinp, dout, inp, weight}), [&](auto width) {
    rmsnorm_dinp_kernel<T, decltype(width)::value>
        <<<row_grid(rows), kThreads, 0, stream>>>(dinp, dout, inp, weight, rstd, rows, C);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());

  const int64_t chunk_rows = chunk_rows_for(rows), chunks = chunks_for(rows);
  const StreamScratch owned(scratch == nullptr ? rmsnorm_backward_scratch_bytes(rows, C) : 0,
                            stream);
  double* partial_dw = static_cast<double*>(scratch != nullptr ? scratch : owned.get());
  const unsigned channel_blocks = static_cast<unsigned>((C + kThreads - 1) / kThreads);
  rmsnorm_weight_partial_kernel<T>
      <<<dim3(channel_blocks, static_cast<unsigned>(chunks)), kThreads, 0, stream>>>(
          partial_dw, dout, inp, rstd, rows, C, chunk_rows);
  TRAINER_CUDA_CHECK(cudaGetLastError());
  rmsnorm_weight_final_kernel<<<channel_blocks, kThreads, 0, stream>>>(dweight, partial_dw, chunks,
                                                                       C);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

size_t rmsnorm_backward_scratch_bytes(int64_t rows, int64_t channels) {
  if (rows <= 0 || channels <= 0) return 0;
  return static_cast<size_t>(chunks_for(rows)) * static_cast<size_t>(channels) * sizeof(double);
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t rows,
                     int64_t channels, float eps, cudaStream_t stream) {
  launch_forward(out, rstd, inp, weight, rows, channels, eps, stream);
}
void rmsnorm_forward(__nv_bfloat16* out, float* rstd, const __nv_bfloat16* inp,
                     const __nv_bfloat16* weight, int64_t rows, int64_t channels, float eps,
                     cudaStream_t stream) {
  launch_forward(out, rstd, inp, weight, rows, channels, eps, stream);
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int64_t rows, int64_t channels,
                      void* scratch, cudaStream_t stream) {
  launch_backward(dinp, dweight, dout, inp, weight, rstd, rows, channels, scratch, stream);
}
void rmsnorm_backward(__nv_bfloat16* dinp, float* dweight, const __nv_bfloat16* dout,
                      const __nv_bfloat16* inp, const __nv_bfloat16* weight, const float* rstd,
                      int64_t rows, int64_t channels, void* scratch, cudaStream_t stream) {
  launch_backward(dinp, dweight, dout, inp, weight, rstd, rows, channels, scratch, stream);
}

}  // namespace runtime::cuda
