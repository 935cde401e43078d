// Host CUDA: runs the CUDA backend's kernels on the host, so its never-run code executes in CI.
// Forced into every translated kernel source (translate.cmake): the device built-ins
// (threadIdx, __syncthreads, warp shuffles, the bf16 mma of the flash kernels) and the launch
// that replaces `kernel<<<grid, block, shared, stream>>>(args)`. See Note [Host CUDA].
#pragma once

// Before the CUDA headers, which define __shared__ as nothing for a host compiler: a block's
// shared variables are function-local statics, one per kernel, reused by each block in turn,
// all in one section that the engine refills before each block.
#if !defined(__shared__)
#define __shared__ static __attribute__((section("host_cuda_shared")))
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

// Note [Host CUDA]
// Each CUDA thread of a block is a fiber on one host thread; the blocks of a grid run one after
// another, each launch completes before it returns, after its stream's pending work (Note
// [Host CUDA streams]). A fiber runs until it reaches a synchronisation point:
//  - __syncthreads: it waits until every live thread of its block has arrived (threads that
//    returned count as arrived);
//  - a warp collective (__shfl_xor_sync, __syncwarp, mma.sync): it waits for every live lane of
//    its warp, which is where each lane reads the others' registers.
// A block whose live threads all wait without any being able to go on (a barrier reached by
// part of the block, a warp collective some lanes skip) ends the launch with an error naming the
// kernel's grid, instead of a hang. `__shared__` variables are function-local statics in the
// section host_cuda_shared, so the threads of a block share them and blocks (which run in turn)
// reuse them; dynamic shared memory is one buffer per launch. Before each block both are
// refilled with a byte pattern, so that reading before writing shows. Launches from several
// host threads take turns. Launches check what the device checks: block size, grid size and
// dynamic shared memory against the emulated H200's limits and the kernel's cudaFuncSetAttribute
// opt-in. The mma.m16n8k16 fragments follow the PTX ISA's layout (section "Matrix Fragments for
// mma.m16n8k16 with floating point type"); products are exact in f32 and summed in k order.
// Each warp runs as far as it can (until its live lanes wait at the block barrier) before the
// next warp starts, its lanes taking turns between warp collectives: warps run ahead of each
// other as far as the device may let them. The schedule (HOST_CUDA_SCHEDULE) orders the blocks
// of a grid, the warps of a block and the lanes of a warp: by index (`forward`, the default) or
// the reverse. Any two threads, or blocks, run in one order under one schedule and in the other
// under the other, so a kernel that reads what another thread writes without a barrier between
// them (a race) reads the old value under one schedule and the new one under the other: the
// kernel-level GPU tests run under both, and one of them fails.
// What this does not show: memory-model effects (a thread sees another's writes whole, in
// program order, at the moment it runs), device rounding, speed.
namespace host_cuda {

enum class Schedule { forward, reverse };
// HOST_CUDA_SCHEDULE's (`forward` or `reverse`; unset: forward), until a test sets another.
Schedule schedule();
void set_schedule(Schedule schedule);

// The running thread's coordinates (valid inside a kernel only).
const uint3& thread_index();
const uint3& block_index();
const dim3& block_dim();
const dim3& grid_dim();
unsigned char* dynamic_shared_memory();

void sync_block();
void sync_warp(unsigned mask);
// The 8 bytes lane `source` of the calling warp passed (every live lane calls it together).
uint64_t warp_exchange(unsigned mask, uint64_t value, int source);
// d = a * b + c for one warp: m16n8k16, bf16 operands (two per 32-bit register), f32 c/d.
void warp_mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);

struct LaunchShape {
  dim3 grid;
  dim3 block;
  size_t shared_bytes = 0;
  const void* kernel = nullptr;  // identifies the kernel's opt-in shared memory
  cudaStream_t stream = nullptr;
};
// Runs `thread_body` once per thread of the launch (see the Note), after the stream's pending
// work (stream_work.h); records a launch error for cudaGetLastError instead when the shape is
// one the device would refuse.
void run_grid(const LaunchShape& shape, const std::function<void()>& thread_body);

// `kernel<<<grid, block, shared, stream>>>(args...)` is translated to
// `::host_cuda::launch(kernel, grid, block, shared, stream)(args...)`.
template <class... Params>
class Launcher {
 public:
  Launcher(void (*kernel)(Params...), LaunchShape shape) : kernel_(kernel), shape_(shape) {}
  template <class... Args>
  void operator()(Args&&... args) const {
    const std::tuple<Params...> values(std::forward<Args>(args)...);  // converted like a call
    run_grid(shape_, [&] { std::apply(kernel_, values); });
  }

 private:
  void (*kernel_)(Params...);
  LaunchShape shape_;
};

template <class... Params>
Launcher<Params...> launch(void (*kernel)(Params...), dim3 grid, dim3 block,
                           size_t shared_bytes = 0, cudaStream_t stream = nullptr) {
  return Launcher<Params...>(kernel, LaunchShape{grid, block, shared_bytes,
                                                 reinterpret_cast<const void*>(kernel), stream});
}

template <class T>
T shfl_xor(unsigned mask, T value, int lane_mask) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  const int lane = static_cast<int>(thread_index().x % 32);
  bits = warp_exchange(mask, bits, lane ^ lane_mask);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

}  // namespace host_cuda

// The device built-ins, on the host. cuda_runtime.h has declared threadIdx and friends as
// variables; from here on the names are the running fiber's.
#define threadIdx (::host_cuda::thread_index())
#define blockIdx (::host_cuda::block_index())
#define blockDim (::host_cuda::block_dim())
#define gridDim (::host_cuda::grid_dim())
#define HOST_CUDA_DYNAMIC_SHARED() (::host_cuda::dynamic_shared_memory())
#if !defined(__launch_bounds__)
#define __launch_bounds__(...)
#endif

inline void __syncthreads() {
  ::host_cuda::sync_block();
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::host_cuda::sync_warp(mask);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  (void)width;
  return ::host_cuda::shfl_xor(mask, value, lane_mask);
}

// CUDA's integer min / max of device code (the host has std::min / std::max only).
inline int min(int a, int b) {
  return a < b ? a : b;
}
inline int max(int a, int b) {
  return a < b ? b : a;
}
