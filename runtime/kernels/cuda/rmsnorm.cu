// RMS normalization: one block per row, the mean square in fp32 reduced in a fixed order.
// Backward: dinp by rows as in forward; dweight as per-(row chunk, channel) partial sums in
// double in scratch, then summed over chunks in order: deterministic, no atomics. The query and
// key heads' norms: one warp per head, their weights' gradients as RMSNorm's.
#include <algorithm>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/norm_rows.cuh"
#include "runtime/kernels/cuda/rmsnorm.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;     // device_common.cuh
using namespace ::runtime::cuda::norm_rows;  // norm_rows.cuh

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
  float x[kWidth], w[kWidth];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = inp + r * C;
    const float square_sum = thread_row_sum<kWidth>(in, C, [](float v) { return v * v; });
    const float mean_square = block_reduce(square_sum, partials, SumOp{}) / static_cast<float>(C);
    const float s = 1.f / sqrtf(mean_square + eps);
    T* y = out + r * C;
    for_thread_packs<kWidth>(C, [&](int64_t c) {
      load_pack<kWidth>(in + c, x);
      load_pack<kWidth>(weight + c, w);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) x[k] = w[k] * normalized<T>(x[k], s);
      store_pack<kWidth>(y + c, x);
    });
    if (threadIdx.x == 0) rstd[r] = s;
  }
}

// dinp += rstd * (g - xhat * mean(g * xhat)), g = dout * weight, xhat = inp * rstd.
template <class T, int kWidth>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* rstd,
                        int64_t rows, int64_t C) {
  __shared__ float partials[kThreads / kWarpThreads];
  float x[kWidth], dy[kWidth], w[kWidth], dx[kWidth];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = inp + r * C;
    const T* d_out = dout + r * C;
    const float s = rstd[r];
    float g_xhat_sum = 0.f;
    for_thread_packs<kWidth>(C, [&](int64_t c) {
      load_dinp_packs<kWidth>(in, d_out, weight, c, x, dy, w);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) g_xhat_sum += (dy[k] * w[k]) * (x[k] * s);
    });
    const float b = block_reduce(g_xhat_sum, partials, SumOp{}) / static_cast<float>(C);
    T* d_in = dinp + r * C;
    for_thread_packs<kWidth>(C, [&](int64_t c) {
      load_dinp_packs<kWidth>(in, d_out, weight, c, x, dy, w);
      load_pack<kWidth>(d_in + c, dx);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) dx[k] += (dy[k] * w[k] - (x[k] * s) * b) * s;
      store_pack<kWidth>(d_in + c, dx);
    });
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

// ---- the query and key heads' norms: one warp per head ----

constexpr int kWarpsPerBlock = kThreads / kWarpThreads;

// Head i of the compact list (Note [Query and key norms]): whether it is a key head, where it
// sits in qkv, and the list index of the k-th query head or the k-th key head.
struct QkHeads {
  int64_t count, group_size, head_dim;
  __device__ bool key(int64_t i) const { return i % (group_size + 1) == group_size; }
  __device__ int64_t qkv_offset(int64_t i) const {
    return (i / (group_size + 1) * (group_size + 2) + i % (group_size + 1)) * head_dim;
  }
  __device__ int64_t of_kind(int64_t k, bool is_key) const {
    return is_key ? k * (group_size + 1) + group_size
                  : k / group_size * (group_size + 1) + k % group_size;
  }
};

// The sum over the warp's lanes in a fixed order; every lane gets it.
__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = kWarpThreads / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ __forceinline__ int64_t first_warp_head() {
  return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpThreads;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    qk_norm_forward_kernel(T* qkv, T* input, float* rstd, const T* q_weight, const T* k_weight,
                           QkHeads h, float eps) {
  const int64_t lane = threadIdx.x % kWarpThreads, D = h.head_dim;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t i = first_warp_head(); i < h.count; i += step) {
    T* y = qkv + h.qkv_offset(i);
    T* x = input + i * D;
    float square_sum = 0.f;
    for (int64_t c = lane; c < D; c += kWarpThreads) {
      x[c] = y[c];
      const float v = to_float(y[c]);
      square_sum += v * v;
    }
    const float s = 1.f / sqrtf(warp_sum(square_sum) / static_cast<float>(D) + eps);
    const T* w = h.key(i) ? k_weight : q_weight;
    for (int64_t c = lane; c < D; c += kWarpThreads)
      y[c] = from_float<T>(to_float(w[c]) * normalized<T>(to_float(x[c]), s));
    if (lane == 0) rstd[i] = s;
  }
}

// dout (dqkv's q and k heads) replaced by rstd * (g - xhat * mean(g * xhat)), g = dout * weight.
template <class T>
__global__ void __launch_bounds__(kThreads)
    qk_norm_dinput_kernel(T* dqkv, const T* input, const float* rstd, const T* q_weight,
                          const T* k_weight, QkHeads h) {
  const int64_t lane = threadIdx.x % kWarpThreads, D = h.head_dim;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t i = first_warp_head(); i < h.count; i += step) {
    T* dy = dqkv + h.qkv_offset(i);
    const T* x = input + i * D;
    const T* w = h.key(i) ? k_weight : q_weight;
    const float s = rstd[i];
    float g_xhat_sum = 0.f;
    for (int64_t c = lane; c < D; c += kWarpThreads)
      g_xhat_sum += (to_float(dy[c]) * to_float(w[c])) * (to_float(x[c]) * s);
    const float b = warp_sum(g_xhat_sum) / static_cast<float>(D);
    for (int64_t c = lane; c < D; c += kWarpThreads) {
      const float xhat = to_float(x[c]) * s;
      dy[c] = from_float<T>((to_float(dy[c]) * to_float(w[c]) - xhat * b) * s);
    }
  }
}

// partial_dw[chunk][c] = sum over the chunk's heads of one kind (query or key), in order, of
// dout * xhat (xhat rounded as the forward's). Grid: (channel blocks, chunks).
template <class T>
__global__ void __launch_bounds__(kThreads)
    qk_norm_weight_partial_kernel(double* partial_dw, const T* dqkv, const T* input,
                                  const float* rstd, QkHeads h, bool is_key, int64_t heads_of_kind,
                                  int64_t chunk_heads) {
  const int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (c >= h.head_dim) return;
  const int64_t begin = blockIdx.y * chunk_heads;
  const int64_t end = begin + chunk_heads < heads_of_kind ? begin + chunk_heads : heads_of_kind;
  double dw = 0.0;
  for (int64_t k = begin; k < end; ++k) {
    const int64_t i = h.of_kind(k, is_key);
    dw += static_cast<double>(to_float(dqkv[h.qkv_offset(i) + c]) *
                              normalized<T>(to_float(input[i * h.head_dim + c]), rstd[i]));
  }
  partial_dw[blockIdx.y * h.head_dim + c] = dw;
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

QkHeads qk_heads(QkHeadsShape shape) {
  return {shape.rows * shape.kv_heads * (shape.group_size + 1), shape.group_size, shape.head_dim};
}

unsigned warp_grid(int64_t heads) {
  return static_cast<unsigned>(std::min((heads + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
}

void check_qk_shape(QkHeadsShape shape) {
  TRAINER_ASSERT(
      shape.rows >= 0 && shape.kv_heads > 0 && shape.group_size > 0 && shape.head_dim > 0,
      "qk_norm of " << shape.rows << " rows, " << shape.kv_heads << " kv heads of "
                    << shape.group_size << " query heads of " << shape.head_dim);
}

template <class T>
void launch_qk_forward(T* qkv, T* input, float* rstd, const T* q_weight, const T* k_weight,
                       QkHeadsShape shape, float eps, cudaStream_t stream) {
  check_qk_shape(shape);
  const QkHeads h = qk_heads(shape);
  if (h.count == 0) return;
  qk_norm_forward_kernel<T>
      <<<warp_grid(h.count), kThreads, 0, stream>>>(qkv, input, rstd, q_weight, k_weight, h, eps);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_qk_backward(T* dqkv, float* dq_weight, float* dk_weight, const T* input,
                        const float* rstd, const T* q_weight, const T* k_weight, QkHeadsShape shape,
                        void* scratch, cudaStream_t stream) {
  check_qk_shape(shape);
  const QkHeads h = qk_heads(shape);
  if (h.count == 0) return;
  const StreamScratch owned(scratch == nullptr ? qk_norm_backward_scratch_bytes(shape) : 0, stream);
  double* partial_dw = static_cast<double*>(scratch != nullptr ? scratch : owned.get());
  const unsigned channel_blocks = static_cast<unsigned>((shape.head_dim + kThreads - 1) / kThreads);
  // The weights' gradients first: they read dout, which the input gradient then replaces.
  for (const bool is_key : {false, true}) {
    const int64_t heads = shape.rows * shape.kv_heads * (is_key ? 1 : shape.group_size);
    const int64_t chunk_heads = chunk_rows_for(heads), chunks = chunks_for(heads);
    qk_norm_weight_partial_kernel<T>
        <<<dim3(channel_blocks, static_cast<unsigned>(chunks)), kThreads, 0, stream>>>(
            partial_dw, dqkv, input, rstd, h, is_key, heads, chunk_heads);
    TRAINER_CUDA_CHECK(cudaGetLastError());
    rmsnorm_weight_final_kernel<<<channel_blocks, kThreads, 0, stream>>>(
        is_key ? dk_weight : dq_weight, partial_dw, chunks, shape.head_dim);
    TRAINER_CUDA_CHECK(cudaGetLastError());
  }
  qk_norm_dinput_kernel<T>
      <<<warp_grid(h.count), kThreads, 0, stream>>>(dqkv, input, rstd, q_weight, k_weight, h);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

size_t qk_norm_backward_scratch_bytes(QkHeadsShape shape) {
  if (shape.rows <= 0 || shape.kv_heads <= 0 || shape.head_dim <= 0) return 0;
  // The query heads' partial sums and the key heads' reuse one buffer, one after the other.
  const int64_t heads = shape.rows * shape.kv_heads;
  return static_cast<size_t>(std::max(chunks_for(heads * shape.group_size), chunks_for(heads))) *
         static_cast<size_t>(shape.head_dim) * sizeof(double);
}

void qk_norm_forward(float* qkv, float* input, float* rstd, const float* q_weight,
                     const float* k_weight, QkHeadsShape heads, float eps, cudaStream_t stream) {
  launch_qk_forward(qkv, input, rstd, q_weight, k_weight, heads, eps, stream);
}
void qk_norm_forward(__nv_bfloat16* qkv, __nv_bfloat16* input, float* rstd,
                     const __nv_bfloat16* q_weight, const __nv_bfloat16* k_weight,
                     QkHeadsShape heads, float eps, cudaStream_t stream) {
  launch_qk_forward(qkv, input, rstd, q_weight, k_weight, heads, eps, stream);
}

void qk_norm_backward(float* dqkv, float* dq_weight, float* dk_weight, const float* input,
                      const float* rstd, const float* q_weight, const float* k_weight,
                      QkHeadsShape heads, void* scratch, cudaStream_t stream) {
  launch_qk_backward(dqkv, dq_weight, dk_weight, input, rstd, q_weight, k_weight, heads, scratch,
                     stream);
}
void qk_norm_backward(__nv_bfloat16* dqkv, float* dq_weight, float* dk_weight,
                      const __nv_bfloat16* input, const float* rstd, const __nv_bfloat16* q_weight,
                      const __nv_bfloat16* k_weight, QkHeadsShape heads, void* scratch,
                      cudaStream_t stream) {
  launch_qk_backward(dqkv, dq_weight, dk_weight, input, rstd, q_weight, k_weight, heads, scratch,
                     stream);
}

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
