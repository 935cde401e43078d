// GELU forward (=) and backward (=), one element per thread step in a grid-stride loop, in
// float whatever the storage type; tanhf / erff / expf are the IEEE-accurate CUDA math
// functions (no fast-math), so a result depends only on its own input.
#include <algorithm>
#include <type_traits>

#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"
#include "runtime/kernels/cuda/gelu.h"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh


constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;    // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1 / sqrt(2 pi)

template <GeluKind kKind>
__device__ __forceinline__ float gelu(float x) {
  if constexpr (kKind == GeluKind::tanh) {
    const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    return 0.5f * x * (1.f + t);
  } else {
    return 0.5f * x * (1.f + erff(x * kInvSqrt2));
  }
}

template <GeluKind kKind>
__device__ __forceinline__ float gelu_grad(float x) {
  if constexpr (kKind == GeluKind::tanh) {
    // d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    const float du_dx = kSqrt2OverPi * (1.f + 3.f * kCubic * x * x);
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * du_dx;
  } else {
    // d/dx = Phi(x) + x phi(x)
    const float cdf = 0.5f * (1.f + erff(x * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
    return cdf + x * pdf;
  }
}

template <class T, GeluKind kKind>
__global__ void gelu_forward_kernel(T* out, const T* inp, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = from_float<T>(gelu<kKind>(to_float(inp[i])));
}

template <class T, GeluKind kKind>
__global__ void gelu_backward_kernel(T* dinp, const T* dout, const T* inp, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    dinp[i] = from_float<T>(to_float(dout[i]) * gelu_grad<kKind>(to_float(inp[i])));
}

template <class T>
void launch_forward(T* out, const T* inp, int64_t n, GeluKind kind, cudaStream_t stream) {
  if (n <= 0) return;
  if (kind == GeluKind::tanh) {
    gelu_forward_kernel<T, GeluKind::tanh><<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  } else {
    gelu_forward_kernel<T, GeluKind::erf><<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  }
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_backward(T* dinp, const T* dout, const T* inp, int64_t n, GeluKind kind,
                     cudaStream_t stream) {
  if (n <= 0) return;
  if (kind == GeluKind::tanh) {
    gelu_backward_kernel<T, GeluKind::tanh>
        <<<grid_for(n), kThreads, 0, stream>>>(dinp, dout, inp, n);
  } else {
    gelu_backward_kernel<T, GeluKind::erf>
        <<<grid_for(n), kThreads, 0, stream>>>(dinp, dout, inp, n);
  }
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gelu_forward(float* out, const float* inp, int64_t n, GeluKind kind, cudaStream_t stream) {
  launch_forward(out, inp, n, kind, stream);
}
void gelu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, int64_t n, GeluKind kind,
                  cudaStream_t stream) {
  launch_forward(out, inp, n, kind, stream);
}

void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n, GeluKind kind,
                   cudaStream_t stream) {
  launch_backward(dinp, dout, inp, n, kind, stream);
}
void gelu_backward(__nv_bfloat16* dinp, const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                   int64_t n, GeluKind kind, cudaStream_t stream) {
  launch_backward(dinp, dout, inp, n, kind, stream);
}

}  // namespace runtime::cuda
