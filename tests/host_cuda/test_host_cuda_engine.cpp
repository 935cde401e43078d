// Host CUDA's kernel engine (Note [Host CUDA]): the schedule orders blocks, warps and lanes (a
// warp runs ahead to the block barrier, and a missing barrier fails under one schedule),
// barriers order a block's shared-memory writes before its reads, shuffles exchange lanes, the
// mma follows the PTX fragment layout, a deadlock ends the launch with an error, launches the
// device would refuse are refused, and an access past an allocation faults.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/host_cuda/host_cuda.h"  // first: it defines __shared__ for the CUDA headers

namespace {

constexpr int kThreads = 64;

__global__ void rotate_through_shared(int* out) {
  __shared__ int slots[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  slots[t] = 100 * static_cast<int>(blockIdx.x) + t;
  __syncthreads();
  out[blockIdx.x * kThreads + t] = slots[(t + 1) % kThreads];
  __syncthreads();  // the next block reuses slots
}

TEST(HostCudaEngine, BarrierOrdersSharedWritesBeforeReads) {
  std::vector<int> out(3 * kThreads, -1);
  host_cuda::launch(rotate_through_shared, 3, kThreads)(out.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < kThreads; ++t)
      EXPECT_EQ(out[b * kThreads + t], 100 * b + (t + 1) % kThreads) << b << " " << t;
}

__global__ void shuffle_xor(float* out, int lane_mask) {
  const int t = static_cast<int>(threadIdx.x);
  out[t] = __shfl_xor_sync(0xffffffffu, static_cast<float>(t) + 0.5f, lane_mask);
}

// Sets the engine's schedule for a scope (the tests also run under HOST_CUDA_SCHEDULE=reverse).
class ScopedSchedule {
 public:
  explicit ScopedSchedule(host_cuda::Schedule schedule) : before_(host_cuda::schedule()) {
    host_cuda::set_schedule(schedule);
  }
  ~ScopedSchedule() { host_cuda::set_schedule(before_); }
  ScopedSchedule(const ScopedSchedule&) = delete;
  ScopedSchedule& operator=(const ScopedSchedule&) = delete;

 private:
  host_cuda::Schedule before_;
};

TEST(HostCudaEngine, TheScheduleIsTheEnvironments) {
  const char* value = std::getenv("HOST_CUDA_SCHEDULE");
  const bool reverse = value != nullptr && std::string(value) == "reverse";
  EXPECT_EQ(host_cuda::schedule(),
            reverse ? host_cuda::Schedule::reverse : host_cuda::Schedule::forward);
}

// Each thread's place in the order the engine first ran the threads of the launch.
__global__ void record_order(int* order, int* next) {
  const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  order[block * blockDim.x * blockDim.y * blockDim.z + thread] = (*next)++;
}

TEST(HostCudaEngine, TheScheduleOrdersBlocksAndThreads) {
  const dim3 grid(3, 2, 2), block(4, 2, 2);
  const int total = 12 * 16;
  for (const host_cuda::Schedule schedule :
       {host_cuda::Schedule::forward, host_cuda::Schedule::reverse}) {
    const ScopedSchedule scoped(schedule);
    std::vector<int> order(total, -1);
    int next = 0;
    host_cuda::launch(record_order, grid, block)(order.data(), &next);
    ASSERT_EQ(next, total);
    for (int i = 0; i < total; ++i)
      EXPECT_EQ(order[i], schedule == host_cuda::Schedule::forward ? i : total - 1 - i) << i;
  }
}

// Each thread's place in the run order before and after a warp collective, then the block's.
__global__ void record_warp_steps(int* order, int* next) {
  const int t = static_cast<int>(threadIdx.x);
  order[t] = (*next)++;
  __syncwarp();
  order[blockDim.x + t] = (*next)++;
  __syncthreads();
  order[2 * blockDim.x + t] = (*next)++;
}

TEST(HostCudaEngine, AWarpRunsAheadUntilTheBlockBarrier) {
  for (const host_cuda::Schedule schedule :
       {host_cuda::Schedule::forward, host_cuda::Schedule::reverse}) {
    const ScopedSchedule scoped(schedule);
    std::vector<int> order(3 * kThreads, -1);
    int next = 0;
    host_cuda::launch(record_warp_steps, 1, kThreads)(order.data(), &next);
    const bool forward = schedule == host_cuda::Schedule::forward;
    for (int t = 0; t < kThreads; ++t) {
      // The warp's place among the two warps, and the lane's among its 32.
      const int warp = forward ? t / 32 : 1 - t / 32, lane = forward ? t % 32 : 31 - t % 32;
      EXPECT_EQ(order[t], 64 * warp + lane) << t;
      // The first warp passes its collective before the other starts.
      EXPECT_GE(order[kThreads + t], 64 * warp + 32) << t;
      EXPECT_LT(order[kThreads + t], 64 * warp + 64) << t;
      EXPECT_GE(order[2 * kThreads + t], 128) << t;  // past the block barrier: after all
    }
  }
}

// Thread 0 publishes a value that every thread reads, without the barrier between.
__global__ void broadcast_without_barrier(int* out) {
  __shared__ int value;
  if (threadIdx.x == 0) value = 7 + static_cast<int>(blockIdx.x);
  out[blockIdx.x * blockDim.x + threadIdx.x] = value;
  __syncthreads();  // the next block reuses value
}

TEST(HostCudaEngine, AMissingBarrierFailsUnderOneOfTheSchedules) {
  const auto wrong_reads = [](host_cuda::Schedule schedule) {
    const ScopedSchedule scoped(schedule);
    std::vector<int> out(2 * kThreads, -1);
    host_cuda::launch(broadcast_without_barrier, 2, kThreads)(out.data());
    int wrong = 0;
    for (int i = 0; i < 2 * kThreads; ++i) wrong += out[i] != 7 + i / kThreads;
    return wrong;
  };
  EXPECT_EQ(wrong_reads(host_cuda::Schedule::forward), 0);  // thread 0 ran first
  EXPECT_EQ(wrong_reads(host_cuda::Schedule::reverse), 2 * (kThreads - 1));
}

TEST(HostCudaEngine, ShuffleXorReadsThePartnerLane) {
  for (int lane_mask : {1, 2, 16}) {
    std::vector<float> out(kThreads, -1.f);
    host_cuda::launch(shuffle_xor, 1, kThreads)(out.data(), lane_mask);
    for (int t = 0; t < kThreads; ++t) {
      const int partner = (t / 32) * 32 + ((t % 32) ^ lane_mask);
      EXPECT_EQ(out[t], static_cast<float>(partner) + 0.5f) << lane_mask << " " << t;
    }
  }
}

// A (16 x 16) and B (16 x 8) with small integers (exact in bf16 and in every f32 sum).
float a_value(int row, int k) {
  return static_cast<float>((row * 3 + k * 5) % 7 - 3);
}
float b_value(int k, int col) {
  return static_cast<float>((k * 2 + col * 3) % 5 - 2);
}
uint32_t bf16_pair(float low, float high) {
  uint32_t lo, hi;
  std::memcpy(&lo, &low, 4);
  std::memcpy(&hi, &high, 4);
  return (lo >> 16) | (hi & 0xffff0000u);
}

// Each lane loads its fragments as the PTX ISA lists them (g = lane / 4, t = lane % 4):
// a0..a7 at rows g, g, g+8, g+8, g, g, g+8, g+8 and cols 2t, 2t+1, 2t, 2t+1, 2t+8, ...;
// b0..b3 at rows 2t, 2t+1, 2t+8, 2t+9 and col g; c0..c3 at (g, 2t), (g, 2t+1), (g+8, 2t), ...
__global__ void mma_tile(float* d) {
  const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
  const uint32_t a[4] = {bf16_pair(a_value(g, 2 * t), a_value(g, 2 * t + 1)),
                         bf16_pair(a_value(g + 8, 2 * t), a_value(g + 8, 2 * t + 1)),
                         bf16_pair(a_value(g, 2 * t + 8), a_value(g, 2 * t + 9)),
                         bf16_pair(a_value(g + 8, 2 * t + 8), a_value(g + 8, 2 * t + 9))};
  const uint32_t b[2] = {bf16_pair(b_value(2 * t, g), b_value(2 * t + 1, g)),
                         bf16_pair(b_value(2 * t + 8, g), b_value(2 * t + 9, g))};
  float c[4] = {1.f, 2.f, 3.f, 4.f};
  host_cuda::warp_mma_m16n8k16_bf16(c, a, b);
  for (int i = 0; i < 4; ++i) d[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = c[i];
}

TEST(HostCudaEngine, MmaFollowsThePtxFragmentLayout) {
  std::vector<float> d(16 * 8, 0.f);
  host_cuda::launch(mma_tile, 1, 32)(d.data());
  for (int row = 0; row < 16; ++row) {
    for (int col = 0; col < 8; ++col) {
      float expected = static_cast<float>(1 + (row / 8) * 2 + col % 2);  // the c it started from
      for (int k = 0; k < 16; ++k) expected += a_value(row, k) * b_value(k, col);
      EXPECT_EQ(d[row * 8 + col], expected) << row << " " << col;
    }
  }
}

__global__ void split_barriers() {
  if (threadIdx.x == 0) {
    __syncwarp();  // lane 0 alone: its warp's other lanes wait at the block barrier
  } else {
    __syncthreads();
  }
}

TEST(HostCudaEngine, ABarrierNoThreadCanPassIsReported) {
  try {
    host_cuda::launch(split_barriers, 1, kThreads)();
    FAIL() << "the launch returned";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("block (0, 0, 0)"), std::string::npos) << e.what();
  }
}

__global__ void throwing_kernel(int at) {
  if (static_cast<int>(threadIdx.x) == at) throw std::out_of_range("thread " + std::to_string(at));
}

TEST(HostCudaEngine, AThreadsExceptionEndsTheLaunch) {
  EXPECT_THROW(host_cuda::launch(throwing_kernel, 4, kThreads)(17), std::out_of_range);
  host_cuda::launch(throwing_kernel, 4, kThreads)(-1);  // and the engine runs the next launch
}

__global__ void touch_dynamic_shared(unsigned char* out) {
  unsigned char* const shared = host_cuda::dynamic_shared_memory();
  if (threadIdx.x == 0) *out = shared[0];
}

TEST(HostCudaEngine, LaunchesTheDeviceRefusesAreRefused) {
  unsigned char first = 0;
  host_cuda::launch(touch_dynamic_shared, 1, 1025)(&first);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  host_cuda::launch(touch_dynamic_shared, dim3(1, 65536), 32)(&first);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);

  constexpr size_t kBig = size_t{64} << 10;  // over the 48 KiB every kernel may use
  host_cuda::launch(touch_dynamic_shared, 1, 32, kBig)(&first);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(
      cudaFuncSetAttribute(reinterpret_cast<const void*>(touch_dynamic_shared),
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBig)),
      cudaSuccess);
  host_cuda::launch(touch_dynamic_shared, 1, 32, kBig)(&first);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(first, 0xA5);  // unwritten shared memory reads as the fill pattern
  EXPECT_EQ(cudaFuncSetAttribute(reinterpret_cast<const void*>(touch_dynamic_shared),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, 232448 + 1),
            cudaErrorInvalidValue);  // past the H200's opt-in limit
}

TEST(HostCudaEngineDeathTest, AnAccessPastAnAllocationFaults) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1000), cudaSuccess);
  volatile char* bytes = static_cast<char*>(p);
  bytes[1023] = 1;  // the slack up to 256-byte granularity is the allocation's
  EXPECT_DEATH(bytes[1024] = 1, "");
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // twice
}

}  // namespace
