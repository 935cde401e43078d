// The replay of one training step of one rank on the meta device, through the functions Trainer
// runs (rank_state.h): what build_rank_state allocates once, then one step's schedule, gradient
// reduction, clipping and update; a microbatch's ids as the step allocates them
// (allocate_microbatch_ids), unfilled. The layout tests compare each category with a real run.
#include "trainer/planning/rank_memory.h"

#include <memory>
#include <optional>

#include "parallel/core/replay_communicator.h"
#include "recompute/executor.h"
#include "runtime/device_scratch.h"
#include "runtime/meta_device.h"
#include "runtime/trace.h"
#include "trainer/engine/optimizer.h"
#include "trainer/engine/rank_state.h"

namespace trainer {

int64_t RankMemory::total() const {
  int64_t bytes = device_overhead;
  for (const int64_t p : peak) bytes += p;
  return bytes;
}

RankMemory predict_rank_memory(const Config& config, int64_t world_rank,
                               runtime::memory_timeline::Timeline* timeline) {
  parallel::ProcessGroups groups = parallel::replay_groups(config.parallel, world_rank);
  runtime::MetaAllocator allocator;
  RankState state;
  build_rank_state(state, config, groups, allocator);
  const int64_t payload_before = groups.payload_bytes(), ring_before = groups.cp->payload_bytes();
  const StageSetup& setup = state.setup;

  allocator.reset_peaks();
  if (timeline != nullptr) runtime::memory_timeline::start(allocator);
  // A device backend's scratch (Note [Device scratch]): its final size, held through the step.
  const runtime::ScratchSizes* scratch_sizes = runtime::device_scratch_sizes();
  std::optional<runtime::MetaScratch> scratch;
  if (config.train.device == Device::cuda && scratch_sizes != nullptr)
    scratch.emplace(*scratch_sizes);
  {  // Trainer::train_step's work, with its scopes (a timeline's phases)
    const runtime::trace::Scope step_scope({.name = "step", .step = 1});
    compute_step_gradients(
        state, groups, config,
        make_pipeline_step(state, groups, config, 1, [&](int64_t, int64_t chunk) {
          return allocate_microbatch_ids(config, setup,
                                         state.chunks[static_cast<size_t>(chunk)]->chunk(),
                                         allocator, config.train.device == Device::cuda)
              .micro;
        }));
    const double norm = state.optimizer->grad_norm(groups, state.grads, setup.shard.embedding);
    apply_update(state, groups, config, norm, config.optimizer.lr, 1);
  }
  if (timeline != nullptr) *timeline = runtime::memory_timeline::stop();

  RankMemory memory;
  memory.comm_payload_bytes = groups.payload_bytes() - payload_before;
  memory.context_payload_bytes = groups.cp->payload_bytes() - ring_before;
  const runtime::AllocatorStats stats = allocator.stats();
  for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories)
    memory.peak[static_cast<size_t>(c)] = stats[c].peak;
  if (scratch)
    memory.peak[static_cast<size_t>(runtime::MemoryCategory::workspace)] +=
        static_cast<int64_t>(scratch->bytes());
  if (config.train.device == Device::cuda) {
    const parallel::ParallelConfig& p = config.parallel;
    const int64_t communicators =
        (p.tensor > 1) + (p.context > 1) + (p.replicas() > 1) + (p.pipeline > 1) * 2;
    memory.device_overhead =
        kCudaContextBytes + kCublasWorkspaceBytes + communicators * kNcclBuffersBytes;
  }
  return memory;
}

}  // namespace trainer
