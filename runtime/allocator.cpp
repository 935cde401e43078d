// Host caching allocator and the statistics bookkeeping shared by every allocator
// (MemoryStat, StatsAllocator).
#include "runtime/allocator.h"

#include <cstdlib>
#include <new>

#include "runtime/error.h"

namespace runtime {

std::string_view category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::param: return "param";
    case MemoryCategory::grad: return "grad";
    case MemoryCategory::optimizer: return "optimizer";
    case MemoryCategory::activation: return "activation";
    case MemoryCategory::workspace: return "workspace";
    case MemoryCategory::comm: return "comm";
  }
  return "?";
}

void MemoryStat::add(int64_t bytes) {
  current += bytes;
  allocated += bytes;
  if (current > peak) peak = current;
}

void MemoryStat::remove(int64_t bytes) {
  current -= bytes;
  freed += bytes;
  TRAINER_ASSERT(current >= 0, "memory stat went negative: " << current);
}

AllocatorStats StatsAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void StatsAllocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (MemoryStat& stat : stats_.by_category) stat.peak = stat.current;
  stats_.reserved.peak = stats_.reserved.current;
}

void* FreeLists::take(int64_t block_bytes) {
  auto it = lists_.find(block_bytes);
  if (it == lists_.end() || it->second.empty()) return nullptr;
  void* block = it->second.back();
  it->second.pop_back();
  return block;
}

namespace {
int64_t round_up(int64_t bytes) {
  const int64_t a = Allocator::kAlignmentBytes;
  return (bytes + a - 1) / a * a;
}
}  // namespace

CpuAllocator::~CpuAllocator() { release_cache(); }

void* CpuAllocator::allocate(int64_t bytes, MemoryCategory category) {
  TRAINER_ASSERT(bytes >= 0, "negative allocation " << bytes);
  if (bytes == 0) return nullptr;
  const int64_t block = round_up(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = free_blocks_.take(block);
  if (ptr == nullptr) {
    ptr = std::aligned_alloc(kAlignmentBytes, static_cast<size_t>(block));
    if (ptr == nullptr) {
      throw LibraryError(TRAINER_STR("[rank " << error_rank() << "] out of host memory: "
                                              << bytes << " bytes for category "
                                              << category_name(category) << " (live "
                                              << stats_.reserved.current << " bytes reserved)"));
    }
    stats_.reserved.add(block);
    ++stats_.system_allocations;
  }
  category_stat(category).add(bytes);
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, int64_t bytes, MemoryCategory category) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  category_stat(category).remove(bytes);
  free_blocks_.put(round_up(bytes), ptr);
}

void CpuAllocator::release_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  free_blocks_.release_all([&](int64_t block_bytes, void* block) {
    std::free(block);
    stats_.reserved.remove(block_bytes);
  });
}

}  // namespace runtime
