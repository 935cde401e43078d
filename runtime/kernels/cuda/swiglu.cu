// SwiGLU forward (=) and backward (=): one (row, j) pair per thread step in a grid-stride loop,
// in float whatever the storage type; expf is the IEEE-accurate CUDA function (no fast math),
// so a result depends only on its own gate and up. A thread reads its gate and up before it
// writes their gradients, so dinp may alias inp.
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/swiglu.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh

__device__ __forceinline__ float sigmoid(float g) {
  return 1.f / (1.f + expf(-g));
}

// Index: Note [Index width], bounded by the input's 2 * rows * ffn elements.
template <class T, class Index>
__global__ void swiglu_forward_kernel(T* out, const T* inp, Index n, Index ffn) {
  for (Index i = grid_start<Index>(); i < n; i += grid_step<Index>()) {
    const Index r = i / ffn, j = i - r * ffn;
    const Index gate = 2 * r * ffn + j;
    const float g = to_float(inp[gate]), u = to_float(inp[gate + ffn]);
    out[i] = from_float<T>(g * sigmoid(g) * u);
  }
}

// silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))).
template <class T, class Index>
__global__ void swiglu_backward_kernel(T* dinp, const T* dout, const T* inp, Index n, Index ffn) {
  for (Index i = grid_start<Index>(); i < n; i += grid_step<Index>()) {
    const Index r = i / ffn, j = i - r * ffn;
    const Index gate = 2 * r * ffn + j;
    const float g = to_float(inp[gate]), u = to_float(inp[gate + ffn]), dy = to_float(dout[i]);
    const float sig = sigmoid(g);
    dinp[gate] = from_float<T>(dy * u * (sig * (1.f + g * (1.f - sig))));
    dinp[gate + ffn] = from_float<T>(dy * (g * sig));
  }
}

template <class T>
void launch_forward(T* out, const T* inp, int64_t rows, int64_t ffn, cudaStream_t stream) {
  const int64_t n = rows * ffn;
  if (n <= 0) return;
  with_index_type(2 * n, [&](auto index) {
    using Index = decltype(index);
    swiglu_forward_kernel<T, Index><<<grid_for(n), kThreads, 0, stream>>>(
        out, inp, static_cast<Index>(n), static_cast<Index>(ffn));
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_backward(T* dinp, const T* dout, const T* inp, int64_t rows, int64_t ffn,
                     cudaStream_t stream) {
  const int64_t n = rows * ffn;
  if (n <= 0) return;
  with_index_type(2 * n, [&](auto index) {
    using Index = decltype(index);
    swiglu_backward_kernel<T, Index><<<grid_for(n), kThreads, 0, stream>>>(
        dinp, dout, inp, static_cast<Index>(n), static_cast<Index>(ffn));
  });
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void swiglu_forward(float* out, const float* inp, int64_t rows, int64_t ffn, cudaStream_t stream) {
  launch_forward(out, inp, rows, ffn, stream);
}
void swiglu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, int64_t rows, int64_t ffn,
                    cudaStream_t stream) {
  launch_forward(out, inp, rows, ffn, stream);
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, int64_t rows, int64_t ffn,
                     cudaStream_t stream) {
  launch_backward(dinp, dout, inp, rows, ffn, stream);
}
void swiglu_backward(__nv_bfloat16* dinp, const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                     int64_t rows, int64_t ffn, cudaStream_t stream) {
  launch_backward(dinp, dout, inp, rows, ffn, stream);
}

}  // namespace runtime::cuda
