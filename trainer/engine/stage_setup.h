// What one rank of a pipeline stage runs, derived once from a validated Config: microbatches,
// schedule, model chunks with their specs and recompute plans, layer shapes, FLOPs and memory
// predictions. Pure (it allocates nothing); the trainer, `trainer plan` and the benches read it.
#pragma once

#include <cstdint>
#include <vector>

#include "model/flops.h"
#include "model/gpt_params.h"
#include "model/layer_stash.h"
#include "parallel/core/parallel_config.h"
#include "parallel/pipeline/schedules.h"
#include "recompute/executor.h"
#include "recompute/memory_model.h"
#include "recompute/plan.h"
#include "trainer/config/config.h"

namespace trainer {

// One model chunk (virtual stage) of the stage.
struct StageChunk {
  parallel::LayerRange layers;         // global layers [first, first + count)
  recompute::ChunkSpec spec;           // what the chunk's executor runs
  recompute::RecomputePlan plan;       // the stage plan's slice for these layers
  recompute::ActivationMemory memory;  // predicted for one microbatch in flight
};

struct StageSetup {
  int64_t stage = 0;             // pipeline stage
  int64_t num_microbatches = 0;  // per optimizer step on each data-parallel rank
  parallel::ScheduleKind schedule = parallel::ScheduleKind::no_pipeline;
  model::ModelShard shard;         // the parameters this rank holds
  recompute::RecomputePlan plan;   // every layer of the stage, in the order it runs them
  std::vector<StageChunk> chunks;  // the stage's model chunks, in virtual-stage order
  // One layer, one microbatch, on this rank, in training (dropout on; the executor derives
  // its evaluation shapes from these by turning dropout off).
  model::LayerDims dims;
  model::LayerFlops layer_flops;          // forward matmul FLOPs of one layer for one microbatch
  int64_t model_flops_per_step = 0;       // 3 x forward FLOPs over every microbatch: the MFU count
  int64_t recompute_flops_per_step = 0;   // matmul FLOPs the plan reruns, over every microbatch
  int64_t predicted_activation_peak = 0;  // bytes of the activation category over the schedule
};

// The setup of tensor-parallel rank `tp_rank` and context-parallel rank `cp_rank` of pipeline
// stage `stage`: values only, for any rank (every cp rank has the same shapes, so a prediction
// may take rank 0). The groups the layers communicate over are the executors' (rank_state.h).
StageSetup make_stage_setup(const Config& config, int64_t stage, int64_t tp_rank,
                            int64_t cp_rank = 0);

}  // namespace trainer
