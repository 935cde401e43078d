// GPU infrastructure tests (skipped without a device): the caching allocator's exact statistics,
// caching, peaks, cache release and the context's scratch in it; copy helpers, the context's
// pinned transfers; streams and events.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/kernels/cuda/stream.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using runtime::MemoryCategory;
using runtime::cuda::CudaAllocator;

constexpr int64_t kMiB = int64_t{1} << 20;

class CudaAllocatorTest : public gpu_test::GpuTest {};

TEST_F(CudaAllocatorTest, RoundsSmallTo512BytesAndLargeTo2MiB) {
  EXPECT_EQ(CudaAllocator::rounded_size(1), 512);
  EXPECT_EQ(CudaAllocator::rounded_size(512), 512);
  EXPECT_EQ(CudaAllocator::rounded_size(513), 1024);
  EXPECT_EQ(CudaAllocator::rounded_size(kMiB - 1), kMiB);
  EXPECT_EQ(CudaAllocator::rounded_size(kMiB), 2 * kMiB);
  EXPECT_EQ(CudaAllocator::rounded_size(3 * kMiB), 4 * kMiB);
}

TEST_F(CudaAllocatorTest, StatsCountRequestedBytesPerCategoryExactly) {
  CudaAllocator allocator;
  EXPECT_EQ(allocator.device(), runtime::DeviceKind::cuda);
  void* param = allocator.allocate(1000, MemoryCategory::param);
  void* activation = allocator.allocate(3 * kMiB, MemoryCategory::activation);
  ASSERT_NE(param, nullptr);
  ASSERT_NE(activation, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(param) % runtime::Allocator::kAlignmentBytes, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(activation) % runtime::Allocator::kAlignmentBytes, 0u);
  EXPECT_EQ(allocator.allocate(0, MemoryCategory::grad), nullptr);

  runtime::AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats[MemoryCategory::param].current, 1000);
  EXPECT_EQ(stats[MemoryCategory::param].peak, 1000);
  EXPECT_EQ(stats[MemoryCategory::param].allocated, 1000);
  EXPECT_EQ(stats[MemoryCategory::activation].current, 3 * kMiB);
  EXPECT_EQ(stats[MemoryCategory::grad].allocated, 0);
  EXPECT_EQ(stats.reserved.current, 1024 + 4 * kMiB);
  EXPECT_EQ(stats.system_allocations, 2);

  allocator.deallocate(param, 1000, MemoryCategory::param);
  stats = allocator.stats();
  EXPECT_EQ(stats[MemoryCategory::param].current, 0);
  EXPECT_EQ(stats[MemoryCategory::param].peak, 1000);
  EXPECT_EQ(stats[MemoryCategory::param].freed, 1000);
  EXPECT_EQ(stats.reserved.current, 1024 + 4 * kMiB);  // cached, still held
  allocator.deallocate(activation, 3 * kMiB, MemoryCategory::activation);
  EXPECT_EQ(allocator.stats()[MemoryCategory::activation].freed, 3 * kMiB);
}

TEST_F(CudaAllocatorTest, ContextScratchComesFromTheGivenAllocator) {
  CudaAllocator allocator;
  {
    runtime::cuda::CudaContext context;
    context.use_allocator(&allocator);
    void* first = context.scratch(1000);
    EXPECT_EQ(allocator.stats()[MemoryCategory::workspace].current, 1000);
    EXPECT_EQ(context.scratch(800), first);  // large enough: kept
    context.scratch(3000);                   // grows to max(3000, 2 * 1000)
    EXPECT_EQ(allocator.stats()[MemoryCategory::workspace].current, 3000);
    EXPECT_EQ(allocator.stats()[MemoryCategory::workspace].freed, 1000);
  }
  EXPECT_EQ(allocator.stats()[MemoryCategory::workspace].current, 0);  // returned by the context
}

// 2.5 chunks of the pinned staging (Note [Pinned transfers]) plus an odd tail, and one small
// copy, each way: the bytes come back as they went.
TEST_F(CudaAllocatorTest, ContextTransfersThroughPinnedChunksRoundTrip) {
  runtime::cuda::CudaContext context;
  for (const size_t bytes : {size_t{40} * kMiB + 3, size_t{1000}}) {
    std::vector<unsigned char> sent(bytes), received(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) sent[i] = static_cast<unsigned char>(i * 131 + i / 4099);
    void* device = nullptr;
    ASSERT_EQ(cudaMalloc(&device, bytes), cudaSuccess);
    context.upload(device, sent.data(), bytes);
    context.download(received.data(), device, bytes);
    cudaFree(device);
    EXPECT_TRUE(sent == received) << bytes << " bytes";
  }
}

TEST_F(CudaAllocatorTest, FreedBlockIsReusedWithoutCudaMalloc) {
  CudaAllocator allocator;
  void* first = allocator.allocate(1000, MemoryCategory::activation);
  allocator.deallocate(first, 1000, MemoryCategory::activation);
  void* second = allocator.allocate(900, MemoryCategory::workspace);  // same 1024 B block
  EXPECT_EQ(second, first);
  EXPECT_EQ(allocator.stats().system_allocations, 1);
  void* third = allocator.allocate(1500, MemoryCategory::workspace);  // 1536 B: a miss
  EXPECT_NE(third, first);
  EXPECT_EQ(allocator.stats().system_allocations, 2);
  EXPECT_EQ(allocator.stats()[MemoryCategory::workspace].current, 900 + 1500);
  allocator.deallocate(second, 900, MemoryCategory::workspace);
  allocator.deallocate(third, 1500, MemoryCategory::workspace);
}

TEST_F(CudaAllocatorTest, ResetPeaksStartsANewWindow) {
  CudaAllocator allocator;
  void* a = allocator.allocate(4096, MemoryCategory::grad);
  void* b = allocator.allocate(8192, MemoryCategory::grad);
  allocator.deallocate(b, 8192, MemoryCategory::grad);
  EXPECT_EQ(allocator.stats()[MemoryCategory::grad].peak, 4096 + 8192);
  allocator.reset_peaks();
  runtime::AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats[MemoryCategory::grad].peak, 4096);
  EXPECT_EQ(stats[MemoryCategory::grad].current, 4096);
  EXPECT_EQ(stats.reserved.peak, stats.reserved.current);
  allocator.deallocate(a, 4096, MemoryCategory::grad);
}

TEST_F(CudaAllocatorTest, ReleaseCacheReturnsReservedToZero) {
  CudaAllocator allocator;
  void* small = allocator.allocate(100, MemoryCategory::optimizer);
  void* large = allocator.allocate(5 * kMiB, MemoryCategory::comm);
  allocator.deallocate(small, 100, MemoryCategory::optimizer);
  allocator.deallocate(large, 5 * kMiB, MemoryCategory::comm);
  EXPECT_EQ(allocator.stats().reserved.current, 512 + 6 * kMiB);
  allocator.release_cache();
  runtime::AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.reserved.current, 0);
  EXPECT_EQ(stats.reserved.freed, stats.reserved.allocated);
  void* again = allocator.allocate(100, MemoryCategory::optimizer);
  EXPECT_EQ(allocator.stats().system_allocations, 3);  // the cache was empty
  allocator.deallocate(again, 100, MemoryCategory::optimizer);
}

TEST_F(CudaAllocatorTest, DeallocateWithWrongSizeOrCategoryIsABug) {
  CudaAllocator allocator;
  void* ptr = allocator.allocate(256, MemoryCategory::param);
  EXPECT_THROW(allocator.deallocate(ptr, 128, MemoryCategory::param), std::logic_error);
  EXPECT_THROW(allocator.deallocate(ptr, 256, MemoryCategory::grad), std::logic_error);
  allocator.deallocate(ptr, 256, MemoryCategory::param);
  EXPECT_EQ(allocator.stats()[MemoryCategory::param].current, 0);
}

TEST_F(CudaAllocatorTest, OutOfMemoryThrowsNamingBytesAndCategory) {
  CudaAllocator allocator;
  void* kept = allocator.allocate(1000, MemoryCategory::param);
  const int64_t impossible = int64_t{1} << 50;  // 1 PiB
  try {
    allocator.allocate(impossible, MemoryCategory::activation);
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const runtime::LibraryError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(std::to_string(impossible)), std::string::npos) << message;
    EXPECT_NE(message.find("activation"), std::string::npos) << message;
    EXPECT_NE(message.find("reserved 1024"), std::string::npos) << message;  // 1000 rounds up
    EXPECT_NE(message.find("allocated 1000"), std::string::npos) << message;
  }
  runtime::AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats[MemoryCategory::activation].allocated, 0);
  EXPECT_EQ(stats.system_allocations, 1);
  // The device still works after the failed allocation.
  void* after = allocator.allocate(2048, MemoryCategory::activation);
  runtime::cuda::memset_zero(after, 2048);
  allocator.deallocate(after, 2048, MemoryCategory::activation);
  allocator.deallocate(kept, 1000, MemoryCategory::param);
}

TEST_F(CudaAllocatorTest, CopyHelpersRoundTripAndZero) {
  CudaAllocator allocator;
  const std::vector<float> values = gpu_test::random_vector(3000, 7);
  const int64_t bytes = static_cast<int64_t>(values.size() * sizeof(float));
  void* device = allocator.allocate(bytes, MemoryCategory::activation);
  runtime::cuda::copy_to_device(device, values.data(), bytes);
  std::vector<float> back(values.size(), 0.0f);
  runtime::cuda::copy_to_host(back.data(), device, bytes);
  EXPECT_EQ(back, values);
  runtime::cuda::memset_zero(device, bytes);
  runtime::cuda::copy_to_host(back.data(), device, bytes);
  EXPECT_EQ(back, std::vector<float>(values.size(), 0.0f));
  allocator.deallocate(device, bytes, MemoryCategory::activation);
}

class CudaStreamTest : public gpu_test::GpuTest {};

TEST_F(CudaStreamTest, WorkOnAStreamIsDoneAfterSynchronize) {
  runtime::cuda::CudaStream stream;
  ASSERT_NE(stream.get(), nullptr);
  const std::vector<float> values = gpu_test::random_vector(1 << 16, 11);
  gpu_test::DeviceBuffer<float> device(values.size());
  std::vector<float> back(values.size(), 0.0f);
  TRAINER_CUDA_CHECK(cudaMemcpyAsync(device.data(), values.data(), values.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, stream.get()));
  TRAINER_CUDA_CHECK(cudaMemcpyAsync(back.data(), device.data(), values.size() * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  EXPECT_EQ(back, values);
}

TEST_F(CudaStreamTest, EventOrdersTwoStreams) {
  runtime::cuda::CudaStream producer;
  runtime::cuda::CudaStream consumer;
  runtime::cuda::CudaEvent ready;
  const std::vector<float> values = gpu_test::random_vector(1 << 16, 12);
  gpu_test::DeviceBuffer<float> device(values.size());
  std::vector<float> back(values.size(), 0.0f);
  const size_t bytes = values.size() * sizeof(float);
  TRAINER_CUDA_CHECK(cudaMemsetAsync(device.data(), 0, bytes, producer.get()));
  TRAINER_CUDA_CHECK(
      cudaMemcpyAsync(device.data(), values.data(), bytes, cudaMemcpyHostToDevice, producer.get()));
  ready.record(producer.get());
  consumer.wait(ready);
  TRAINER_CUDA_CHECK(
      cudaMemcpyAsync(back.data(), device.data(), bytes, cudaMemcpyDeviceToHost, consumer.get()));
  consumer.synchronize();
  EXPECT_EQ(back, values);
}

TEST_F(CudaStreamTest, MovedFromOwnersHoldNothing) {
  runtime::cuda::CudaStream first;
  const cudaStream_t handle = first.get();
  runtime::cuda::CudaStream second(std::move(first));
  EXPECT_EQ(second.get(), handle);
  EXPECT_EQ(first.get(),
            nullptr);  // NOLINT(bugprone-use-after-move): checking the moved-from state
  second.synchronize();

  runtime::cuda::CudaEvent start(true);
  runtime::cuda::CudaEvent stop(true);
  start.record(second.get());
  stop.record(second.get());
  stop.synchronize();
  EXPECT_GE(stop.elapsed_ms_since(start), 0.0f);
  runtime::cuda::CudaEvent moved(std::move(stop));
  EXPECT_EQ(stop.get(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_NE(moved.get(), nullptr);
}

}  // namespace
