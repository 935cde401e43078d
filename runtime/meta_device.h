// The meta device: tensors with a shape, a dtype and an allocator category but no memory, and
// operators that do nothing. Running the trainer's own code on it replays every allocation of a
// step in order, with exact per-category statistics, in no time and on any machine: what the
// whole-rank memory model (trainer/planning/rank_memory.h) predicts with (Note [Meta replay]).
#pragma once

#include <cstdint>

#include "runtime/allocator.h"
#include "runtime/ops.h"

namespace runtime {

// Note [Meta replay]
// A meta tensor's address is a number no one may dereference: the meta allocator counts bytes
// per category as a real allocator does and hands out distinct, aligned, never-mapped addresses.
// Every operator on meta tensors is a no-op (a download writes zeros), so the code above the
// kernels runs unchanged: the model, the executors and the schedules never touch tensor memory
// outside ops (the emulated device's guarded memory holds them to it in CI).

class MetaAllocator final : public StatsAllocator {
 public:
  DeviceKind device() const override { return DeviceKind::meta; }
  void* allocate(int64_t bytes, MemoryCategory category) override;
  void deallocate(void* ptr, int64_t bytes, MemoryCategory category) override;

 private:
  uint64_t next_address_ = uint64_t{1} << 46;  // never mapped: far above any heap
};

namespace ops {
// The operators of meta tensors: each does nothing (results are zero).
const Backend& meta_backend();
}  // namespace ops

}  // namespace runtime
