// Tests of the host caching allocator and tensors: exact per-category statistics, cache
// reuse without system allocations, alignment, peak windows, and views that share storage
// and give it back when the last one is gone.
#include "runtime/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/tensor.h"

namespace {

using namespace runtime;

TEST(CpuAllocator, CountsRequestedBytesPerCategoryExactly) {
  CpuAllocator allocator;
  void* a = allocator.allocate(100, MemoryCategory::param);
  void* b = allocator.allocate(1000, MemoryCategory::activation);
  void* c = allocator.allocate(24, MemoryCategory::activation);
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s[MemoryCategory::param].current, 100);
  EXPECT_EQ(s[MemoryCategory::activation].current, 1024);
  EXPECT_EQ(s[MemoryCategory::activation].peak, 1024);
  EXPECT_EQ(s[MemoryCategory::grad].allocated, 0);
  allocator.deallocate(b, 1000, MemoryCategory::activation);
  s = allocator.stats();
  EXPECT_EQ(s[MemoryCategory::activation].current, 24);
  EXPECT_EQ(s[MemoryCategory::activation].peak, 1024);
  EXPECT_EQ(s[MemoryCategory::activation].allocated, 1024);
  EXPECT_EQ(s[MemoryCategory::activation].freed, 1000);
  EXPECT_EQ(s[MemoryCategory::param].freed, 0);
  EXPECT_EQ(s.system_allocations, 3);
  // Reserved counts whole 64-byte blocks: 128 + 1024 + 64.
  EXPECT_EQ(s.reserved.current, 128 + 1024 + 64);
  allocator.deallocate(a, 100, MemoryCategory::param);
  allocator.deallocate(c, 24, MemoryCategory::activation);
  for (MemoryCategory category : kAllMemoryCategories)
    EXPECT_EQ(allocator.stats()[category].current, 0);
}

TEST(CpuAllocator, ReusesFreedBlocksWithoutSystemAllocations) {
  CpuAllocator allocator;
  void* a = allocator.allocate(4096, MemoryCategory::workspace);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % Allocator::kAlignmentBytes, 0u);
  allocator.deallocate(a, 4096, MemoryCategory::workspace);
  const AllocatorStats before = allocator.stats();
  // Same rounded size, even under another category: served from the cache.
  void* b = allocator.allocate(4090, MemoryCategory::grad);
  const AllocatorStats after = allocator.stats();
  EXPECT_EQ(b, a);
  EXPECT_EQ(after.system_allocations, before.system_allocations);
  EXPECT_EQ(after.reserved.current, before.reserved.current);
  EXPECT_EQ(after[MemoryCategory::grad].current, 4090);
  // A different size goes to the system.
  void* c = allocator.allocate(8192, MemoryCategory::grad);
  EXPECT_EQ(allocator.stats().system_allocations, before.system_allocations + 1);
  allocator.deallocate(b, 4090, MemoryCategory::grad);
  allocator.deallocate(c, 8192, MemoryCategory::grad);
  allocator.release_cache();
  EXPECT_EQ(allocator.stats().reserved.current, 0);
}

TEST(CpuAllocator, ZeroBytesIsANullAllocationWithoutStats) {
  CpuAllocator allocator;
  EXPECT_EQ(allocator.allocate(0, MemoryCategory::comm), nullptr);
  allocator.deallocate(nullptr, 0, MemoryCategory::comm);
  EXPECT_EQ(allocator.stats()[MemoryCategory::comm].allocated, 0);
  EXPECT_EQ(allocator.stats().system_allocations, 0);
}

TEST(CpuAllocator, ResetPeaksStartsANewWindow) {
  CpuAllocator allocator;
  void* a = allocator.allocate(512, MemoryCategory::activation);
  void* b = allocator.allocate(256, MemoryCategory::activation);
  allocator.deallocate(a, 512, MemoryCategory::activation);
  EXPECT_EQ(allocator.stats()[MemoryCategory::activation].peak, 768);
  allocator.reset_peaks();
  EXPECT_EQ(allocator.stats()[MemoryCategory::activation].peak, 256);
  void* c = allocator.allocate(64, MemoryCategory::activation);
  EXPECT_EQ(allocator.stats()[MemoryCategory::activation].peak, 320);
  allocator.deallocate(b, 256, MemoryCategory::activation);
  allocator.deallocate(c, 64, MemoryCategory::activation);
}

TEST(MemoryStat, NeverGoesNegative) {
  MemoryStat stat;
  stat.add(10);
  EXPECT_THROW(stat.remove(11), std::logic_error);
}

TEST(Tensor, ZerosAndViewsShareStorageUntilTheLastViewDies) {
  CpuAllocator allocator;
  Tensor view;
  {
    Tensor t = Tensor::zeros(allocator, {4, 6}, DType::f32, MemoryCategory::activation);
    EXPECT_EQ(t.numel(), 24);
    EXPECT_EQ(t.nbytes(), 96);
    for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.f32()[i], 0.f);
    view = t.view(6, {3, 6});
    view.f32()[0] = 5.f;  // row 1, column 0 of t
    EXPECT_EQ(t.f32()[6], 5.f);
    Tensor flat = t.reshape({24});
    EXPECT_EQ(flat.f32()[6], 5.f);
    EXPECT_EQ(view.category(), MemoryCategory::activation);
    EXPECT_EQ(allocator.stats()[MemoryCategory::activation].current, 96);
  }
  // t and flat are gone, but the view keeps the storage alive.
  EXPECT_EQ(allocator.stats()[MemoryCategory::activation].current, 96);
  EXPECT_EQ(view.f32()[0], 5.f);
  view = Tensor();
  EXPECT_EQ(allocator.stats()[MemoryCategory::activation].current, 0);
  EXPECT_EQ(allocator.stats()[MemoryCategory::activation].freed, 96);
}

TEST(Tensor, RejectsViewsOutsideTheTensorAndWrongDtypes) {
  CpuAllocator allocator;
  Tensor t = Tensor::empty(allocator, {2, 3}, DType::i32, MemoryCategory::param);
  EXPECT_THROW(t.view(4, {3}), std::logic_error);
  EXPECT_THROW(t.f32(), std::logic_error);
  EXPECT_NE(t.i32(), nullptr);
  EXPECT_EQ(t.nbytes(), 24);
  Tensor masks = Tensor::empty(allocator, {10}, DType::u8, MemoryCategory::activation);
  EXPECT_EQ(allocator.stats()[MemoryCategory::activation].current, 10);
}

}  // namespace
