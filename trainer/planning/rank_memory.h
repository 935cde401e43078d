// The whole-rank memory model: every allocator category (param, grad, optimizer, activation,
// workspace, comm) of one rank over one training step, predicted by replaying the step's
// allocations on the meta device (Note [Meta replay] in runtime/meta_device.h): the same code
// as training, no memory, no data, no device, no peers. The activation category also has its
// closed form (recompute/memory_model.h), which the planner searches with.
#pragma once

#include <array>
#include <cstdint>

#include "runtime/allocator.h"
#include "runtime/memory_timeline.h"
#include "trainer/config/config.h"

namespace trainer {

// On a GPU the process also holds what no allocator counts: the CUDA context and the libraries'
// workspaces. Stated, not measured (typical of CUDA 12/13 on Hopper).
inline constexpr int64_t kCudaContextBytes = int64_t{600} << 20;     // context + kernels
inline constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;  // cuBLASLt workspace
inline constexpr int64_t kNcclBuffersBytes = int64_t{64} << 20;      // per communicator

struct RankMemory {
  std::array<int64_t, runtime::kNumMemoryCategories> peak{};  // bytes, by category
  int64_t device_overhead = 0;  // what no allocator counts (constants above; 0 on the CPU)
  // The payload the step hands this rank's communicators (Communicator::payload_bytes), as the
  // replay's communicators counted it, and the context ring's part of it.
  int64_t comm_payload_bytes = 0;
  int64_t context_payload_bytes = 0;

  int64_t operator[](runtime::MemoryCategory category) const {
    return peak[static_cast<size_t>(category)];
  }
  // The bound the budget is checked against: every category at its own peak at once, plus the
  // overhead. The allocator's simultaneous total never exceeds it.
  int64_t total() const;
};

// World rank `world_rank` of a job of `config`'s shape (the rank's pipeline stage and
// tensor-parallel place follow from it): the peak of each category during one training step,
// and the step's communication payload. With `timeline`, also the step's every allocation and
// free in order, between its phases (runtime/memory_timeline.h): what a run records with
// train.memory_timeline_step, event for event.
RankMemory predict_rank_memory(const Config& config, int64_t world_rank,
                               runtime::memory_timeline::Timeline* timeline = nullptr);

}  // namespace trainer
