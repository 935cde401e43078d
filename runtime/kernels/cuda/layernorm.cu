// Layer normalization: one block per row, row statistics in fp32 reduced in a fixed tree.
// Backward: dinp by rows as in forward; dweight/dbias as per-(row chunk, channel) partial sums
// in double in scratch, then summed over chunks in order: deterministic, no atomics.
#include <algorithm>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/layernorm.h"
#include "runtime/kernels/cuda/norm_rows.cuh"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;     // device_common.cuh
using namespace ::runtime::cuda::norm_rows;  // norm_rows.cuh

// Sum of `value` over the block's kThreads threads in a fixed tree; every thread gets it.
__device__ float block_sum(float value, float* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();  // shared is reused by the next call
  return total;
}

// Row statistics in fp32 (two passes: mean, then the mean square deviation). kWidth: Note
// [Vector access]; C is a multiple of it.
template <class T, int kWidth>
__global__ void __launch_bounds__(kThreads)
    layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                             const T* bias, int64_t rows, int64_t C, float eps) {
  __shared__ float shared[kThreads];
  float x[kWidth], w[kWidth], b[kWidth];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = inp + r * C;
    const float sum = thread_row_sum<kWidth>(in, C, [](float v) { return v; });
    const float m = block_sum(sum, shared) / static_cast<float>(C);
    const float square_sum =
        thread_row_sum<kWidth>(in, C, [m](float v) { return (v - m) * (v - m); });
    const float variance = block_sum(square_sum, shared) / static_cast<float>(C);
    const float s = 1.f / sqrtf(variance + eps);
    T* y = out + r * C;
    for_thread_packs<kWidth>(C, [&](int64_t c) {
      load_pack<kWidth>(in + c, x);
      load_pack<kWidth>(weight + c, w);
      load_pack<kWidth>(bias + c, b);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) x[k] = (x[k] - m) * s * w[k] + b[k];
      store_pack<kWidth>(y + c, x);
    });
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
  }
}

// dinp += rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), dnorm = dout * weight.
template <class T, int kWidth>
__global__ void __launch_bounds__(kThreads)
    layernorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* mean,
                          const float* rstd, int64_t rows, int64_t C) {
  __shared__ float shared[kThreads];
  float x[kWidth], dy[kWidth], w[kWidth], dx[kWidth];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = inp + r * C;
    const T* d_out = dout + r * C;
    const float m = mean[r], s = rstd[r];
    float dnorm_sum = 0.f, dnorm_xhat_sum = 0.f;
    for_thread_packs<kWidth>(C, [&](int64_t c) {
      load_dinp_packs<kWidth>(in, d_out, weight, c, x, dy, w);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) {
        const float dnorm = dy[k] * w[k];
        dnorm_sum += dnorm;
        dnorm_xhat_sum += dnorm * ((x[k] - m) * s);
      }
    });
    const float a = block_sum(dnorm_sum, shared) / static_cast<float>(C);
    const float b = block_sum(dnorm_xhat_sum, shared) / static_cast<float>(C);
    T* d_in = dinp + r * C;
    for_thread_packs<kWidth>(C, [&](int64_t c) {
      load_dinp_packs<kWidth>(in, d_out, weight, c, x, dy, w);
      load_pack<kWidth>(d_in + c, dx);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) {
        const float xhat = (x[k] - m) * s;
        dx[k] += (dy[k] * w[k] - a - xhat * b) * s;
      }
      store_pack<kWidth>(d_in + c, dx);
    });
  }
}

// partial_dw[chunk][c] = sum over the chunk's rows, in order, of dout * xhat; partial_db of dout.
// Grid: (channel blocks, row chunks).
template <class T>
__global__ void __launch_bounds__(kThreads)
    layernorm_param_partial_kernel(double* partial_dw, double* partial_db, const T* dout,
                                   const T* inp, const float* mean, const float* rstd, int64_t rows,
                                   int64_t C, int64_t chunk_rows) {
  const int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (c >= C) return;
  const int64_t chunk = blockIdx.y;
  const int64_t r_begin = chunk * chunk_rows;
  const int64_t r_end = r_begin + chunk_rows < rows ? r_begin + chunk_rows : rows;
  double dw = 0.0, db = 0.0;
  for (int64_t r = r_begin; r < r_end; ++r) {
    const float dy = to_float(dout[r * C + c]);
    const float xhat = (to_float(inp[r * C + c]) - mean[r]) * rstd[r];
    dw += static_cast<double>(dy * xhat);
    db += static_cast<double>(dy);
  }
  partial_dw[chunk * C + c] = dw;
  partial_db[chunk * C + c] = db;
}

// dweight[c] += sum over chunks in order of partial_dw[chunk][c]; dbias likewise.
__global__ void __launch_bounds__(kThreads)
    layernorm_param_final_kernel(float* dweight, float* dbias, const double* partial_dw,
                                 const double* partial_db, int64_t chunks, int64_t C) {
  const int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (c >= C) return;
  double dw = 0.0, db = 0.0;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    dw += partial_dw[chunk * C + c];
    db += partial_db[chunk * C + c];
  }
  dweight[c] += static_cast<float>(dw);
  dbias[c] += static_cast<float>(db);
}

template <class T>
void launch_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias,
                    int64_t rows, int64_t C, float eps, cudaStream_t stream) {
  TRAINER_ASSERT(rows >= 0 && C > 0, "layernorm of " << rows << " rows of " << C << " channels");
  if (rows == 0) return;
  with_pack_width<T>(packed_rows<T>(C, {out, inp, weight, bias}), [&](auto width) {
    layernorm_forward_kernel<T, decltype(width)::value>
        <<<row_grid(rows), kThreads, 0, stream>>>(out, mean, rstd, inp, weight, bias, rows, C, eps);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                     const T* weight, const float* mean, const float* rstd, int64_t rows, int64_t C,
                     void* scratch, cudaStream_t stream) {
  TRAINER_ASSERT(rows >= 0 && C > 0, "layernorm of " << rows << " rows of " << C << " channels");
  if (rows == 0) return;
  with_pack_width<T>(packed_rows<T>(C, {dinp, dout, inp, weight}), [&](auto width) {
    layernorm_dinp_kernel<T, decltype(width)::value>
        <<<row_grid(rows), kThreads, 0, stream>>>(dinp, dout, inp, weight, mean, rstd, rows, C);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());

  const int64_t chunk_rows = chunk_rows_for(rows), chunks = chunks_for(rows);
  const StreamScratch owned(scratch == nullptr ? layernorm_backward_scratch_bytes(rows, C) : 0,
                            stream);
  void* partials = scratch != nullptr ? scratch : owned.get();
  double* partial_dw = static_cast<double*>(partials);
  double* partial_db = partial_dw + chunks * C;
  const unsigned channel_blocks = static_cast<unsigned>((C + kThreads - 1) / kThreads);
  layernorm_param_partial_kernel<T>
      <<<dim3(channel_blocks, static_cast<unsigned>(chunks)), kThreads, 0, stream>>>(
          partial_dw, partial_db, dout, inp, mean, rstd, rows, C, chunk_rows);
  TRAINER_CUDA_CHECK(cudaGetLastError());
  layernorm_param_final_kernel<<<channel_blocks, kThreads, 0, stream>>>(dweight, dbias, partial_dw,
                                                                        partial_db, chunks, C);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

size_t layernorm_backward_scratch_bytes(int64_t rows, int64_t channels) {
  if (rows <= 0 || channels <= 0) return 0;
  return 2 * static_cast<size_t>(chunks_for(rows)) * static_cast<size_t>(channels) * sizeof(double);
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t rows, int64_t channels, float eps,
                       cudaStream_t stream) {
  launch_forward(out, mean, rstd, inp, weight, bias, rows, channels, eps, stream);
}
void layernorm_forward(__nv_bfloat16* out, float* mean, float* rstd, const __nv_bfloat16* inp,
                       const __nv_bfloat16* weight, const __nv_bfloat16* bias, int64_t rows,
                       int64_t channels, float eps, cudaStream_t stream) {
  launch_forward(out, mean, rstd, inp, weight, bias, rows, channels, eps, stream);
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int64_t rows, int64_t channels, void* scratch, cudaStream_t stream) {
  launch_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, channels, scratch,
                  stream);
}
void layernorm_backward(__nv_bfloat16* dinp, float* dweight, float* dbias,
                        const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                        const __nv_bfloat16* weight, const float* mean, const float* rstd,
                        int64_t rows, int64_t channels, void* scratch, cudaStream_t stream) {
  launch_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, channels, scratch,
                  stream);
}

}  // namespace runtime::cuda
