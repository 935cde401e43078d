// Device-side helpers shared by the CUDA kernels of this folder (included by .cu
// files only): f32/bf16 element access in fp32, the 1-D launch shape, block
// reductions, and stream-ordered scratch memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cuda_check.h"

namespace runtime::cuda::device {

constexpr int kThreads = 256;                     // threads per block of 1-D kernels
constexpr int64_t kMaxBlocks = int64_t{1} << 30;  // grid-stride loops cover the rest
constexpr int kWarpThreads = 32;

// Blocks of kThreads for n elements (grid-stride loops handle more than kMaxBlocks).
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// Note [Index width]
// A 64-bit division or modulo costs tens of instructions; a 32-bit one a few. Kernels that
// derive coordinates from a flat index take the index type as a template parameter, and the
// host picks it with with_index_type: uint32_t when every flat index the kernel forms (below
// `bound`) and every grid-stride step past it fit 32 bits, else int64_t. A grid of grid_for(n)
// blocks steps by at most n + kThreads - 1, so i + step stays below 2^32 for n up to
// kMax32BitIndex.
constexpr int64_t kMax32BitIndex = (int64_t{1} << 31) - kThreads;

template <class F>
void with_index_type(int64_t bound, F&& launch) {
  if (bound <= kMax32BitIndex) {
    launch(uint32_t{});
  } else {
    launch(int64_t{});
  }
}

// First index and step of a grid-stride loop in the kernel's index type.
template <class Index>
__device__ __forceinline__ Index grid_start() {
  return static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) +
         static_cast<Index>(threadIdx.x);
}
template <class Index>
__device__ __forceinline__ Index grid_step() {
  return static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
}

__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <class T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return __float2bfloat16(x);
  }
}
__device__ __forceinline__ float load_float(const float* p) {
  return *p;
}
__device__ __forceinline__ float load_float(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
__device__ __forceinline__ void store_float(float* p, float value) {
  *p = value;
}
__device__ __forceinline__ void store_float(__nv_bfloat16* p, float value) {
  *p = __float2bfloat16(value);
}

// Note [Vector access]
// Kernels over contiguous elements take kWidth elements per access: kPack<T> (16 bytes: 4 f32
// or 8 bf16) when every pointer they index is 16-byte aligned and each row (or the whole
// range) is a multiple of the pack, else 1 (the element-wise loop). Each element is computed
// alone in either case, so the results do not depend on the width; reductions change their
// order only, which stays fixed for a shape.
template <class T>
constexpr int kPack = 16 / static_cast<int>(sizeof(T));

template <class T, int kWidth>
struct alignas(sizeof(T) * kWidth) Pack {
  T v[kWidth];
};

inline bool aligned_16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Runs launch(std::integral_constant<int, width>) with the pack of T when `vectorizable`, else 1.
template <class T, class F>
void with_pack_width(bool vectorizable, F&& launch) {
  if (vectorizable) {
    launch(std::integral_constant<int, kPack<T>>{});
  } else {
    launch(std::integral_constant<int, 1>{});
  }
}

// kWidth consecutive elements at p (aligned to the pack) as floats, and back.
template <int kWidth, class T>
__device__ __forceinline__ void load_pack(const T* p, float* values) {
  const Pack<T, kWidth> pack = *reinterpret_cast<const Pack<T, kWidth>*>(p);
#pragma unroll
  for (int k = 0; k < kWidth; ++k) values[k] = to_float(pack.v[k]);
}
template <int kWidth, class T>
__device__ __forceinline__ void store_pack(T* p, const float* values) {
  Pack<T, kWidth> pack;
#pragma unroll
  for (int k = 0; k < kWidth; ++k) pack.v[k] = from_float<T>(values[k]);
  *reinterpret_cast<Pack<T, kWidth>*>(p) = pack;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Combines `value` over the block (blockDim.x a multiple of 32) in a fixed order;
// every thread gets the result. `partials` holds one float per warp.
template <typename Op>
__device__ float block_reduce(float value, float* partials, Op op) {
  for (int offset = kWarpThreads / 2; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
  const int warps = static_cast<int>(blockDim.x) / kWarpThreads;
  __syncthreads();  // partials may still be read by an earlier reduction
  if (threadIdx.x % kWarpThreads == 0) partials[warp] = value;
  __syncthreads();
  float result = partials[0];
  for (int w = 1; w < warps; ++w) result = op(result, partials[w]);
  return result;
}

// Stream-ordered device scratch: malloc_async_retrying on construction, cudaFreeAsync on the
// same stream on destruction (kernels queued before it may still use it); copy deleted.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes > 0) data_ = malloc_async_retrying(bytes, stream);
  }
  ~StreamScratch() {
    if (data_ != nullptr) cudaFreeAsync(data_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  void* get() const { return data_; }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace runtime::cuda::device
