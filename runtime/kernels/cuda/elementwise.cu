// Small vector kernels: elementwise ops in grid-stride loops (each element computed alone,
// bf16 through float), and sum / sum_squares over a fixed partition of kSumChunk elements per
// block, tree-reduced in double, with the partial sums combined by one block in fixed order.
#include <algorithm>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/elementwise.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

constexpr int64_t kSumChunk = int64_t{1} << 16;  // elements per partial sum of sum_squares

// kWidth: Note [Vector access]; `packs` accesses of kWidth elements.
template <class T, int kWidth>
__global__ void add_kernel(T* out, const T* a, const T* b, int64_t packs) {
  float x[kWidth], y[kWidth];
  for (int64_t p = grid_start<int64_t>(); p < packs; p += grid_step<int64_t>()) {
    load_pack<kWidth>(a + p * kWidth, x);
    load_pack<kWidth>(b + p * kWidth, y);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) x[k] += y[k];
    store_pack<kWidth>(out + p * kWidth, x);
  }
}

template <class T>
__global__ void scale_kernel(T* x, float s, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    x[i] = from_float<T>(to_float(x[i]) * s);
}

// Index: Note [Index width].
template <class T, class Index>
__global__ void add_bias_kernel(T* out, const T* bias, Index rows, Index cols) {
  const Index n = rows * cols;
  for (Index i = grid_start<Index>(); i < n; i += grid_step<Index>())
    out[i] = from_float<T>(to_float(out[i]) + to_float(bias[i % cols]));
}

// Index: Note [Index width].
template <class Index>
__global__ void init_param_kernel(float* out, ParamInit init) {
  const auto cols = static_cast<Index>(init.cols);
  const Index n = static_cast<Index>(init.rows) * cols;
  for (Index i = grid_start<Index>(); i < n; i += grid_step<Index>())
    out[i] = param_init_value(init, static_cast<int64_t>(i / cols), static_cast<int64_t>(i % cols));
}

template <class Out, class In>
__global__ void convert_kernel(Out* out, const In* inp, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = from_float<Out>(to_float(inp[i]));
}

// Sums the kThreads values of `shared` in a fixed tree; the total ends in shared[0].
__device__ void block_tree_sum(double* shared) {
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
}

template <class T>  // float or __nv_bfloat16
__device__ __forceinline__ double to_double(T x) {
  return static_cast<double>(to_float(x));
}

// partial[block] = sum of x[i] (or x[i]^2) over the block's chunk [block * kSumChunk, ...).
template <class T, bool kSquare>
__global__ void __launch_bounds__(kThreads)
    sum_partial_kernel(double* partial, const T* x, int64_t n) {
  __shared__ double shared[kThreads];
  const int64_t begin = blockIdx.x * kSumChunk;
  const int64_t end = begin + kSumChunk < n ? begin + kSumChunk : n;
  double sum = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double v = to_double(x[i]);
    sum += kSquare ? v * v : v;
  }
  shared[threadIdx.x] = sum;
  block_tree_sum(shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}

// *result = sum of partial[0, count): thread t adds t, t + kThreads, ... in order, then a tree.
__global__ void __launch_bounds__(kThreads)
    sum_partials_kernel(double* result, const double* partial, int64_t count) {
  __shared__ double shared[kThreads];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) sum += partial[i];
  shared[threadIdx.x] = sum;
  block_tree_sum(shared);
  if (threadIdx.x == 0) *result = shared[0];
}

template <class T>
void launch_add(T* out, const T* a, const T* b, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool packed = n % kPack<T> == 0 && aligned_16(out) && aligned_16(a) && aligned_16(b);
  with_pack_width<T>(packed, [&](auto width) {
    constexpr int kWidth = decltype(width)::value;
    add_kernel<T, kWidth><<<grid_for(n / kWidth), kThreads, 0, stream>>>(out, a, b, n / kWidth);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_scale(T* x, float s, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(x, s, n);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_add_bias(T* out, const T* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  with_index_type(rows * cols, [&](auto index) {
    using Index = decltype(index);
    add_bias_kernel<T, Index><<<grid_for(rows * cols), kThreads, 0, stream>>>(
        out, bias, static_cast<Index>(rows), static_cast<Index>(cols));
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class Out, class In>
void launch_convert(Out* out, const In* inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  convert_kernel<Out, In><<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void add(float* out, const float* a, const float* b, int64_t n, cudaStream_t stream) {
  launch_add(out, a, b, n, stream);
}
void add(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t n,
         cudaStream_t stream) {
  launch_add(out, a, b, n, stream);
}

void scale_inplace(float* x, float s, int64_t n, cudaStream_t stream) {
  launch_scale(x, s, n, stream);
}
void scale_inplace(__nv_bfloat16* x, float s, int64_t n, cudaStream_t stream) {
  launch_scale(x, s, n, stream);
}

void add_bias(float* out, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  launch_add_bias(out, bias, rows, cols, stream);
}
void add_bias(__nv_bfloat16* out, const __nv_bfloat16* bias, int64_t rows, int64_t cols,
              cudaStream_t stream) {
  launch_add_bias(out, bias, rows, cols, stream);
}

int64_t sum_partial_count(int64_t n) {
  return n > 0 ? (n + kSumChunk - 1) / kSumChunk : 0;
}

// The fixed-partition reduction behind sum and sum_squares.
template <bool kSquare, class T>
void launch_sum(double* result_device, const T* x, int64_t n, cudaStream_t stream,
                double* partials) {
  TRAINER_ASSERT(n >= 0, "sum of " << n << " elements");
  if (n == 0) {
    TRAINER_CUDA_CHECK(cudaMemsetAsync(result_device, 0, sizeof(double), stream));
    return;
  }
  const int64_t chunks = sum_partial_count(n);
  TRAINER_ASSERT(chunks <= kMaxBlocks, "sum of " << n << " elements: too many chunks");
  const StreamScratch owned(partials == nullptr ? static_cast<size_t>(chunks) * sizeof(double) : 0,
                            stream);
  double* partial = partials != nullptr ? partials : static_cast<double*>(owned.get());
  sum_partial_kernel<T, kSquare>
      <<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(partial, x, n);
  TRAINER_CUDA_CHECK(cudaGetLastError());
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(result_device, partial, chunks);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

void sum(double* result_device, const float* x, int64_t n, cudaStream_t stream, double* partials) {
  launch_sum<false>(result_device, x, n, stream, partials);
}
void sum(double* result_device, const __nv_bfloat16* x, int64_t n, cudaStream_t stream,
         double* partials) {
  launch_sum<false>(result_device, x, n, stream, partials);
}
void sum_squares(double* result_device, const float* x, int64_t n, cudaStream_t stream,
                 double* partials) {
  launch_sum<true>(result_device, x, n, stream, partials);
}
void sum_squares(double* result_device, const __nv_bfloat16* x, int64_t n, cudaStream_t stream,
                 double* partials) {
  launch_sum<true>(result_device, x, n, stream, partials);
}

void init_param(float* out, const ParamInit& init, cudaStream_t stream) {
  TRAINER_ASSERT(init.rows >= 0 && init.cols >= 0,
                 "init_param of " << init.rows << " x " << init.cols);
  const int64_t n = init.rows * init.cols;
  if (n == 0) return;
  with_index_type(n, [&](auto index) {
    init_param_kernel<decltype(index)><<<grid_for(n), kThreads, 0, stream>>>(out, init);
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

double sum_squares(const float* x, int64_t n, cudaStream_t stream) {
  const StreamScratch result_device(sizeof(double), stream);
  sum_squares(static_cast<double*>(result_device.get()), x, n, stream);
  double result = 0.0;
  TRAINER_CUDA_CHECK(cudaMemcpyAsync(&result, result_device.get(), sizeof(double),
                                     cudaMemcpyDeviceToHost, stream));
  TRAINER_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result;
}

void convert(__nv_bfloat16* out, const float* inp, int64_t n, cudaStream_t stream) {
  launch_convert(out, inp, n, stream);
}
void convert(float* out, const __nv_bfloat16* inp, int64_t n, cudaStream_t stream) {
  launch_convert(out, inp, n, stream);
}

}  // namespace runtime::cuda
