// CudaAllocator: per-size free lists over cudaMalloc, never managed memory
// (Note [Caching allocator and streams] in cuda_allocator.h), and the synchronous
// copy helpers. Stats bookkeeping is StatsAllocator's, shared with CpuAllocator.
#include <cuda_runtime.h>

#include <mutex>
#include <set>

#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device.h"

namespace runtime::cuda {
namespace {

// Every live CudaAllocator, so scratch allocations can ask them to release their caches.
std::mutex g_allocators_mutex;
std::set<CudaAllocator*>& live_allocators() {
  static std::set<CudaAllocator*> allocators;
  return allocators;
}

}  // namespace

CudaAllocator::CudaAllocator() {
  std::lock_guard<std::mutex> lock(g_allocators_mutex);
  live_allocators().insert(this);
}

void* malloc_async_retrying(size_t bytes, cudaStream_t stream) {
  void* ptr = nullptr;
  cudaError_t status = cudaMallocAsync(&ptr, bytes, stream);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    {
      std::lock_guard<std::mutex> lock(g_allocators_mutex);
      for (CudaAllocator* allocator : live_allocators()) allocator->release_cache();
    }
    status = cudaMallocAsync(&ptr, bytes, stream);
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw LibraryError(TRAINER_STR("[rank " << error_rank() << "] CUDA scratch allocation of "
                                            << bytes << " bytes failed ("
                                            << cuda_error_string(status) << ")"));
  }
  return ptr;
}

int64_t CudaAllocator::rounded_size(int64_t bytes) {
  const int64_t unit = bytes < kLargeThresholdBytes ? kSmallRoundingBytes : kLargeRoundingBytes;
  return (bytes + unit - 1) / unit * unit;
}

std::string CudaAllocator::device_name() const { return current_device_name(); }

CudaAllocator::~CudaAllocator() {
  {
    std::lock_guard<std::mutex> registry_lock(g_allocators_mutex);
    live_allocators().erase(this);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // cudaFree's status ignored: no throw from a destructor.
  free_blocks_.release_all([](int64_t, void* block) { cudaFree(block); });
}

void* CudaAllocator::allocate(int64_t bytes, MemoryCategory category) {
  TRAINER_ASSERT(bytes >= 0, "negative allocation " << bytes);
  if (bytes == 0) return nullptr;
  const int64_t block_bytes = rounded_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = free_blocks_.take(block_bytes);
  if (ptr == nullptr) {
    cudaError_t status = cudaMalloc(&ptr, static_cast<size_t>(block_bytes));
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the (non-sticky) error, free the cache, retry once
      release_cache_locked();
      status = cudaMalloc(&ptr, static_cast<size_t>(block_bytes));
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      int64_t allocated_now = 0;
      for (const MemoryStat& stat : stats_.by_category) allocated_now += stat.current;
      throw LibraryError(TRAINER_STR(
          "[rank " << error_rank() << "] CUDA allocation failed (" << cuda_error_string(status)
                   << "): " << bytes << " bytes (block " << block_bytes << ") for category "
                   << category_name(category) << "; reserved " << stats_.reserved.current
                   << " bytes, allocated " << allocated_now << " bytes"));
    }
    stats_.reserved.add(block_bytes);
    ++stats_.system_allocations;
  }
  live_blocks_.emplace(ptr, std::make_pair(bytes, category));
  category_stat(category).add(bytes);
  return ptr;
}

void CudaAllocator::deallocate(void* ptr, int64_t bytes, MemoryCategory category) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_blocks_.find(ptr);
  TRAINER_ASSERT(it != live_blocks_.end(), "deallocate of a pointer this allocator does not hold");
  TRAINER_ASSERT(it->second.first == bytes && it->second.second == category,
                 "deallocate of " << bytes << " bytes as " << category_name(category)
                                  << ", allocated as " << it->second.first << " bytes of "
                                  << category_name(it->second.second));
  live_blocks_.erase(it);
  category_stat(category).remove(bytes);
  free_blocks_.put(rounded_size(bytes), ptr);
}

void CudaAllocator::release_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cache_locked();
}

void CudaAllocator::release_cache_locked() {
  free_blocks_.release_all([&](int64_t block_bytes, void* block) {
    stats_.reserved.remove(block_bytes);
    TRAINER_CUDA_CHECK(cudaFree(block));
  });
}

namespace {
// cudaMemcpy of `bytes` with the device idle before and after.
void copy_synchronously(void* dst, const void* src, int64_t bytes, cudaMemcpyKind kind) {
  TRAINER_ASSERT(bytes >= 0, "negative copy " << bytes);
  if (bytes == 0) return;
  TRAINER_CUDA_CHECK(cudaDeviceSynchronize());
  TRAINER_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<size_t>(bytes), kind));
  TRAINER_CUDA_CHECK(cudaDeviceSynchronize());
}
}  // namespace

void copy_to_device(void* dst, const void* src, int64_t bytes) {
  copy_synchronously(dst, src, bytes, cudaMemcpyHostToDevice);
}

void copy_to_host(void* dst, const void* src, int64_t bytes) {
  copy_synchronously(dst, src, bytes, cudaMemcpyDeviceToHost);
}

void memset_zero(void* ptr, int64_t bytes) {
  TRAINER_ASSERT(bytes >= 0, "negative memset " << bytes);
  if (bytes == 0) return;
  TRAINER_CUDA_CHECK(cudaDeviceSynchronize());
  TRAINER_CUDA_CHECK(cudaMemset(ptr, 0, static_cast<size_t>(bytes)));
  TRAINER_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace runtime::cuda
