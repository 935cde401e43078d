// Runs one model chunk (embedding, this rank's layers, head) for a microbatch
// under a recompute plan. forward_step keeps what the plan says; backward_step
// rebuilds checkpoint groups (one forward of the group with everything kept)
// and selective drops, then runs the layers' backward in reverse. Microbatches
// in flight are held first-in first-out, as every pipeline schedule needs.
#pragma once

#include <deque>
#include <vector>

#include "model/embedding_head.h"
#include "model/gpt_params.h"
#include "recompute/plan.h"

namespace recompute {

using runtime::Tensor;

struct Microbatch {
  Tensor tokens;             // (T, B) i32, category activation (the embedding keeps it)
  Tensor targets;            // (T, B) i32, category activation (the head keeps it)
  int64_t sample_offset = 0;  // global-batch index of its first sample
};

struct StepInfo {
  uint64_t seed = 0;
  int64_t step = 0;  // 1-based optimizer step (Philox key)
};

class ChunkExecutor {
 public:
  ChunkExecutor(const model::GptConfig& config, const model::GptParams& params,
                const model::GptParams& grads, RecomputePlan plan, int64_t micro_batch,
                runtime::Allocator& allocator);

  // Training forward of one microbatch; returns the sum of its token losses.
  // Takes the batch by value: the stashes become the only owners of its tensors.
  double forward_step(Microbatch batch, const StepInfo& step);
  // Backward of the oldest microbatch in flight; gradients accumulate (+=).
  // loss_scale multiplies d(sum of token losses).
  void backward_step(float loss_scale);
  // Forward without dropout and without keeping anything; returns the loss sum.
  double evaluate(const Microbatch& batch);

  int64_t in_flight() const { return static_cast<int64_t>(in_flight_.size()); }
  const RecomputePlan& plan() const { return plan_; }
  const model::LayerDims& train_dims() const { return train_dims_; }
  // Matmul FLOPs spent rebuilding activations since the last reset.
  int64_t recompute_flops() const { return recompute_flops_; }
  void reset_recompute_flops() { recompute_flops_ = 0; }

 private:
  struct InFlight {
    model::EmbeddingStash embedding;
    std::vector<model::LayerStash> layers;
    std::vector<Tensor> group_inputs;  // input of each checkpoint group, at its first layer
    model::HeadStash head;
    model::LayerContext context;       // layer field set per layer
  };
  Tensor hidden(bool keep) const;
  model::LayerContext layer_context(const model::LayerContext& base, int64_t layer) const;
  void backward_group(InFlight& state, int64_t first, int64_t last, Tensor& dx);

  const model::GptConfig& config_;
  const model::GptParams& params_;
  const model::GptParams& grads_;
  RecomputePlan plan_;
  model::LayerDims train_dims_;
  model::LayerDims eval_dims_;
  runtime::Allocator& allocator_;
  std::deque<InFlight> in_flight_;
  int64_t recompute_flops_ = 0;
};

// Layer shapes for a microbatch of this config (training: dropout on).
model::LayerDims layer_dims(const model::GptConfig& config, int64_t micro_batch, bool training);

}  // namespace recompute
