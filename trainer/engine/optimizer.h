// AdamW over the flat parameter buffer with PyTorch semantics, weight decay only
// on tensors of rank >= 2, and clip_grad_norm_-style global-norm clipping.
// fp32 moments (and bf16 runs' fp32 master weights) live in the `optimizer` memory category.
#pragma once

#include <memory>

#include "model/gpt_params.h"
#include "parallel/core/process_groups.h"
#include "parallel/pipeline/grad_buckets.h"
#include "parallel/pipeline/grad_reducer.h"
#include "runtime/op_types.h"
#include "trainer/config/config.h"

namespace trainer {

// PyTorch clip_grad_norm_: scales by max_norm / (norm + 1e-6) when that is < 1.
// Returns the factor applied (1 when none).
double clip_gradients(const model::GptParams& grads, double norm, double max_norm);

// The fp32 state of this rank's model shard in full: master weights and both moments, each
// laid out like the flat parameter buffer.
struct OptimizerState {
  runtime::Tensor master, exp_avg, exp_avg_sq;
};

// Seconds a rank spent inside one step's gradient-reduction calls.
struct GradReduceTime {
  double in_backward_s = 0;     // reports and progress tests while backward ran (overlap on)
  double after_backward_s = 0;  // reduce_gradients: what backward left to do and wait for
};

// What a training step asks of the optimizer around backward, for a replicated (AdamW) or a
// data-parallel-sharded (DistributedAdamW) state. `params`, given at construction, are the
// weights the model computes with; `master` the fp32 weights the update starts from (params
// itself in an fp32 run).
class Optimizer {
 public:
  // `overlap`: optimizer.overlap_grad_reduce.
  explicit Optimizer(bool overlap) : overlap_(overlap) {}
  virtual ~Optimizer() = default;
  // Starts the step's gradient reduction (Note [Overlapped gradient reduction] in
  // parallel/pipeline/grad_reducer.h): the listener to hand the step's schedule so that
  // reductions start during backward, or null when overlap is off (all after backward).
  recompute::GradientListener* start_gradient_reduction(parallel::ProcessGroups& groups,
                                                        const model::GptParams& grads,
                                                        bool sequence_parallel);
  // Finishes it (after backward; starts it first if it was not): every gradient reduction,
  // inside the model replica, then over dp, done on return. Returns the time spent inside
  // the reduction's calls, during backward and here.
  GradReduceTime reduce_gradients(parallel::ProcessGroups& groups, const model::GptParams& grads,
                                  bool sequence_parallel);
  // The global gradient norm, on every rank (collective).
  virtual double grad_norm(parallel::ProcessGroups& groups, const model::GptParams& grads,
                           bool has_embedding_stage) = 0;
  // One update with learning rate `lr`; `step` counts updates from 1. Leaves the compute
  // weights updated on every rank.
  virtual void step(parallel::ProcessGroups& groups, const model::GptParams& grads,
                    const OptimizerConfig& config, double lr, int64_t step) = 0;
  // The full state for checkpoints: the live tensors, or copies gathered into `scratch`
  // (collective over dp). The master weights are current after a step.
  virtual OptimizerState full_state(parallel::Communicator& dp, runtime::Allocator& scratch) = 0;
  // Takes `state` (from full_state, since overwritten) as the state, and sets the compute
  // weights from its master weights.
  virtual void load_full_state(const OptimizerState& state) = 0;

 protected:
  // What the reduction of this optimizer's gradients needs besides groups and gradients: the
  // bucket layout, whether every rank needs the whole average, the staged bucket's buffer.
  virtual parallel::GradReducerArgs reduction_args() const = 0;

 private:
  bool overlap_;
  std::unique_ptr<parallel::GradReducer> reduction_;  // the step's, between start and finish
};

// The replicated optimizer: every dp rank holds and updates the whole shard's state; the
// gradients are averaged over dp bucket by bucket in `layout`'s order (a reduce-scatter and an
// all-gather each, parallel/pipeline/grad_sync.h).
class AdamW final : public Optimizer {
 public:
  AdamW(const model::GptParams& params, const model::GptParams& master,
        const parallel::GradBucketLayout& layout, runtime::Allocator& allocator, bool overlap);

  double grad_norm(parallel::ProcessGroups& groups, const model::GptParams& grads,
                   bool has_embedding_stage) override;
  // With a separate master (bf16), the compute copy is rewritten in the same pass.
  void step(parallel::ProcessGroups& groups, const model::GptParams& grads,
            const OptimizerConfig& config, double lr, int64_t step) override;
  OptimizerState full_state(parallel::Communicator& dp, runtime::Allocator& scratch) override;
  void load_full_state(const OptimizerState& state) override;

 private:
  parallel::GradReducerArgs reduction_args() const override;

  model::GptParams params_, master_;
  parallel::GradBucketLayout layout_;
  runtime::Tensor exp_avg_;     // flat, like the parameters
  runtime::Tensor exp_avg_sq_;  // flat, like the parameters
  runtime::Tensor staging_;     // dp f32 elements (comm) when dp > 1 and a bucket is staged
};

// Where a bf16 run's fp32 master weights are allocated before the optimizer is made: state of
// the optimizer, or under optimizer.distributed a transient copy (workspace) the optimizer takes
// its parts of, to be let go of once it is made.
inline runtime::MemoryCategory master_weights_category(const Config& config) {
  return config.optimizer.distributed ? runtime::MemoryCategory::workspace
                                      : runtime::MemoryCategory::optimizer;
}

// optimizer.distributed: DistributedAdamW (trainer/engine/distributed_optimizer.h), else AdamW.
std::unique_ptr<Optimizer> make_optimizer(const Config& config, parallel::ProcessGroups& groups,
                                          const model::GptParams& params,
                                          const model::GptParams& master,
                                          runtime::Allocator& allocator);

// Hyperparameters of one update of tensors with(out) weight decay.
runtime::AdamWParams adamw_hyper(const OptimizerConfig& config, double lr, int64_t step,
                                 bool weight_decay);

}  // namespace trainer
