// What one rank builds once before its first step, in the order it allocates it: the stage
// setup, the compute weights, the master weights, the gradients, the optimizer and the chunks'
// executors; and the work of one step on it. Trainer and the whole-rank memory replay
// (rank_memory.h) both build and step it here, so the replay allocates what training allocates
// by construction.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "model/gpt_params.h"
#include "parallel/core/process_groups.h"
#include "parallel/pipeline/schedules.h"
#include "recompute/executor.h"
#include "trainer/config/config.h"
#include "trainer/engine/optimizer.h"
#include "trainer/engine/stage_setup.h"

namespace trainer {

struct RankState {
  StageSetup setup;
  model::GptParams params;  // what forward/backward read: bf16 or f32
  model::GptParams master;  // f32; params itself in an fp32 run; none once a distributed
                            // optimizer took its parts of a master copy
  model::GptParams grads;   // f32, zeroed
  std::unique_ptr<Optimizer> optimizer;
  // One per setup.chunks; they hold references to params and grads, so a RankState stays put.
  std::vector<std::unique_ptr<recompute::ChunkExecutor>> chunks;

  // Whether master is a buffer of its own (bf16 runs) rather than params itself (or none).
  bool has_master_copy() const {
    return master.flat.defined() && params.flat.raw() != master.flat.raw();
  }

  RankState() = default;
  RankState(const RankState&) = delete;
  RankState& operator=(const RankState&) = delete;
};

// Where this rank's layers run: its tensor-parallel group and context ring, null where
// `groups.config` has one rank of them.
model::LayerGroups layer_groups(const parallel::ProcessGroups& groups);

// Fills `state` for this rank of `config` (which must outlive it) from `allocator`.
// `initialize` runs once the weights exist and before anything reads them (Trainer: the init
// and the host copy; the replay: nothing): a distributed optimizer takes its parts of the
// master weights when it is made.
void build_rank_state(RankState& state, const Config& config, parallel::ProcessGroups& groups,
                      runtime::Allocator& allocator,
                      const std::function<void(RankState&)>& initialize = {});

// The step's summed loss on every rank: the last stage holds it, summed over pp, then dp x cp.
void all_reduce_step_loss(parallel::ProcessGroups& groups, double& loss_sum);

// The (T, B) i32 rows a microbatch holds on a chunk, in the order a device run stages them (-1:
// none): tokens where it has the embedding, targets where it has the head, document starts on
// every chunk with documents (data.reset_attention_mask or data.reset_position_ids:
// DataConfig::document_starts).
struct MicrobatchRows {
  int64_t tokens = -1, targets = -1, starts = -1;
  int64_t count = 0;
};
MicrobatchRows microbatch_rows(const recompute::ChunkSpec& chunk, bool documents);

// A microbatch's id tensors for `chunk` on `allocator`, as the step allocates them: the one
// source of their order, shapes, names and categories, which Trainer::make_microbatch fills and
// the memory replay only allocates. On a device first one workspace tensor for the rows staged
// on the host and uploaded at once ("uploaded_ids", [rows.count, T, B]), then, as on the host, a
// (T, B) activation tensor per row: tokens, targets, document starts (handed on by
// attach_document_starts). T: this rank's rows of the sequence; B: train.micro_batch_size.
struct MicrobatchIds {
  MicrobatchRows rows;
  int64_t T = 0, B = 0;
  runtime::Tensor uploaded;  // on a device only; freed with these ids, once the rows are copied
  recompute::Microbatch micro;
  runtime::Tensor starts;  // the document starts' tensor, also in micro where they are read
};
MicrobatchIds allocate_microbatch_ids(const Config& config, const StageSetup& setup,
                                      const recompute::ChunkSpec& chunk,
                                      runtime::Allocator& allocator, bool on_device);

// Hands a microbatch's document starts to what reads them: the attention's mask
// (data.reset_attention_mask), the positions (data.reset_position_ids), or both.
void attach_document_starts(recompute::Microbatch& micro, const runtime::Tensor& starts,
                            const DataConfig& data);

// The data of microbatch `mb` for model chunk `chunk`.
using MicrobatchSource = decltype(parallel::PipelineStep::microbatch);

// The pipeline step of `state` for training step `step` (0 for an evaluation): its chunks, its
// pipeline group and microbatch count, microbatches from `microbatch`, and the loss scale that
// makes the gradients the mean over the global batch's tokens (per token of this rank, then
// averaged over the dp x cp replicas). `counted_targets` > 0: the mean over that many targets
// of the global batch instead (data.eod_mask_loss leaves some out).
parallel::PipelineStep make_pipeline_step(RankState& state, parallel::ProcessGroups& groups,
                                          const Config& config, int64_t step,
                                          MicrobatchSource microbatch, int64_t counted_targets = 0);

struct StepGradients {
  double loss_sum = 0;  // over every token of the global batch, on every rank
  GradReduceTime reduce_time;
};

// One step's gradients: zero them, run `pipeline` through the schedule with the gradient
// reduction started, sum the loss over the ranks, finish the reduction.
StepGradients compute_step_gradients(RankState& state, parallel::ProcessGroups& groups,
                                     const Config& config, parallel::PipelineStep pipeline);

// The update that follows: clip to `grad_norm`, then the optimizer's step `step` at `lr`.
void apply_update(RankState& state, parallel::ProcessGroups& groups, const Config& config,
                  double grad_norm, double lr, int64_t step);

}  // namespace trainer
