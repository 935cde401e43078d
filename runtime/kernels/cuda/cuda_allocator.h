// Caching device allocator with the statistics of runtime::Allocator, plus the
// synchronous host<->device copy helpers. Stats count requested bytes per category;
// `reserved` counts bytes held from cudaMalloc (cached blocks included).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/allocator.h"

namespace runtime::cuda {

// Note [Caching allocator and streams]
// A freed block goes to a free list at once and the next allocation of its size
// may hand it out again. That is safe when every kernel touching the memory runs on
// one compute stream (stream order serializes old and new users). Memory used on a
// second stream (communication) must be freed only after that stream's work has
// been waited for (an event the compute stream waits on, or a synchronize).
//
// Block sizes: requests below 1 MiB round up to a multiple of 512 B, larger ones to
// a multiple of 2 MiB; each rounded size has its own free list (exact-size reuse).
class CudaAllocator final : public runtime::StatsAllocator {
 public:
  static constexpr int64_t kSmallRoundingBytes = 512;
  static constexpr int64_t kLargeThresholdBytes = int64_t{1} << 20;  // 1 MiB
  static constexpr int64_t kLargeRoundingBytes = int64_t{2} << 20;   // 2 MiB

  CudaAllocator();
  ~CudaAllocator() override;

  DeviceKind device() const override { return DeviceKind::cuda; }
  std::string device_name() const override;  // the current device's (device.h)
  // On a cudaMalloc failure: releases the cache and retries once, then throws
  // LibraryError naming the bytes, the category and the reserved/allocated bytes.
  void* allocate(int64_t bytes, MemoryCategory category) override;
  // `bytes` and `category` must be those of the allocate() call (asserted).
  void deallocate(void* ptr, int64_t bytes, MemoryCategory category) override;
  // cudaFree's every cached (free) block; live blocks stay.
  void release_cache();

  // The block size a request of `bytes` occupies.
  static int64_t rounded_size(int64_t bytes);

 private:
  void release_cache_locked();

  FreeLists free_blocks_;  // by rounded size
  // ptr -> (requested bytes, category) of every block handed out and not yet returned
  std::unordered_map<void*, std::pair<int64_t, MemoryCategory>> live_blocks_;
};

// Stream-ordered scratch memory (cudaMallocAsync on `stream`) for kernels that need it
// outside the allocator. When the device is full, every CudaAllocator's cache goes back to the
// device (the caches may hold most of it) and the request is tried once more; then it throws
// LibraryError naming the bytes.
void* malloc_async_retrying(size_t bytes, cudaStream_t stream);

// Synchronous, checked copies and zero-fill (the device is idle before and after).
void copy_to_device(void* dst, const void* src, int64_t bytes);
void copy_to_host(void* dst, const void* src, int64_t bytes);
void memset_zero(void* ptr, int64_t bytes);

}  // namespace runtime::cuda
