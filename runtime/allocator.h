// Device memory with per-category statistics (c10's Stat idea). Every byte the
// trainer holds is requested under one MemoryCategory; stats count requested bytes
// exactly, whatever the allocator caches underneath (reserved is reported apart).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/dtype.h"

namespace runtime {

enum class MemoryCategory : uint8_t { param, grad, optimizer, activation, workspace, comm };
inline constexpr int kNumMemoryCategories = 6;
inline constexpr std::array<MemoryCategory, kNumMemoryCategories> kAllMemoryCategories = {
    MemoryCategory::param,      MemoryCategory::grad,      MemoryCategory::optimizer,
    MemoryCategory::activation, MemoryCategory::workspace, MemoryCategory::comm};

std::string_view category_name(MemoryCategory category);

// Bytes: live now, the most ever live at once, and cumulative totals.
struct MemoryStat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // cumulative bytes handed out
  int64_t freed = 0;      // cumulative bytes given back

  void add(int64_t bytes);
  void remove(int64_t bytes);  // asserts current never goes negative
};

struct AllocatorStats {
  std::array<MemoryStat, kNumMemoryCategories> by_category;
  MemoryStat reserved;           // bytes held from the system (caches included)
  int64_t system_allocations = 0;  // calls that had to go to the system (cache misses)

  const MemoryStat& operator[](MemoryCategory category) const {
    return by_category[static_cast<int>(category)];
  }
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DeviceKind device() const = 0;
  // The device's product name as its driver reports it; empty for the host and for devices
  // without one (a time profile's `device` says "cuda: <name>" only where there is one).
  virtual std::string device_name() const { return {}; }
  // Returns memory aligned to kAlignmentBytes; bytes == 0 returns nullptr.
  virtual void* allocate(int64_t bytes, MemoryCategory category) = 0;
  virtual void deallocate(void* ptr, int64_t bytes, MemoryCategory category) = 0;
  virtual AllocatorStats stats() const = 0;
  // Starts a new peak window: every category's peak becomes its current value.
  virtual void reset_peaks() = 0;

  static constexpr int64_t kAlignmentBytes = 64;
};

// What the allocators that own memory share: their AllocatorStats under a mutex, which the
// derived allocator also holds while it updates them or its own caches. Copy deleted (and so
// of every derived allocator).
class StatsAllocator : public Allocator {
 public:
  StatsAllocator() = default;
  StatsAllocator(const StatsAllocator&) = delete;
  StatsAllocator& operator=(const StatsAllocator&) = delete;

  AllocatorStats stats() const override;
  void reset_peaks() override;

 protected:
  MemoryStat& category_stat(MemoryCategory category) {
    return stats_.by_category[static_cast<int>(category)];
  }

  mutable std::mutex mutex_;
  AllocatorStats stats_;
};

// The exact-size free lists of a caching allocator: freed blocks by block size, handed out again
// to the next request of that size. The owning allocator's mutex guards them.
class FreeLists {
 public:
  // A cached block of `block_bytes`, taken off its list, or nullptr when there is none.
  void* take(int64_t block_bytes);
  void put(int64_t block_bytes, void* block) { lists_[block_bytes].push_back(block); }
  // Empties every list, calling release(block_bytes, block) on each block once it has left its
  // list, so a release that throws leaves no freed block to be handed out again.
  template <class Release>
  void release_all(Release&& release) {
    for (auto& [block_bytes, blocks] : lists_) {
      while (!blocks.empty()) {
        void* block = blocks.back();
        blocks.pop_back();
        release(block_bytes, block);
      }
    }
    lists_.clear();
  }

 private:
  std::unordered_map<int64_t, std::vector<void*>> lists_;
};

// Host allocator. Freed blocks are kept in exact-size free lists, so a training
// step that allocates the same shapes as the previous one never calls the system.
class CpuAllocator final : public StatsAllocator {
 public:
  ~CpuAllocator() override;

  DeviceKind device() const override { return DeviceKind::cpu; }
  void* allocate(int64_t bytes, MemoryCategory category) override;
  void deallocate(void* ptr, int64_t bytes, MemoryCategory category) override;
  // Returns every cached block to the system.
  void release_cache();

 private:
  FreeLists free_blocks_;
};

}  // namespace runtime
