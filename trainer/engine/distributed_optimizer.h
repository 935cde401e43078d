// optimizer.distributed (ZeRO-1): the fp32 master weights (bf16 runs) and both AdamW moments
// live in one `optimizer` buffer holding this dp rank's part of every gradient bucket (Note
// [Gradient buckets]); gradients are reduce-scattered to the parts' owners, each rank updates
// its part and the updated compute weights are all-gathered. The update of each element is
// the replicated AdamW's, so only the reduction order can tell the two apart.
#pragma once

#include "parallel/pipeline/grad_buckets.h"
#include "trainer/engine/optimizer.h"

namespace trainer {

class DistributedAdamW final : public Optimizer {
 public:
  struct Args {
    model::GptParams params;  // the compute weights, whole on every dp rank
    model::GptParams master;  // fp32 weights to take this rank's parts from (params in fp32)
    parallel::GradBucketLayout layout;
    bool overlap = true;  // optimizer.overlap_grad_reduce
  };
  DistributedAdamW(const Args& args, runtime::Allocator& allocator);

  // Sum of squares over this rank's parts, one all-reduce over the world.
  double grad_norm(parallel::ProcessGroups& groups, const model::GptParams& grads,
                   bool has_embedding_stage) override;
  void step(parallel::ProcessGroups& groups, const model::GptParams& grads,
            const OptimizerConfig& config, double lr, int64_t step) override;
  // Gathered over dp into `scratch` (workspace); the master weights are the compute weights
  // themselves in an fp32 run.
  OptimizerState full_state(parallel::Communicator& dp, runtime::Allocator& scratch) override;
  void load_full_state(const OptimizerState& state) override;

  const parallel::GradBucketLayout& layout() const { return layout_; }

 private:
  parallel::GradReducerArgs reduction_args() const override;
  // Whether the master weights are a part of state_ (bf16) or the compute weights (fp32).
  bool has_master_part() const { return master_part_.defined(); }
  // Copies this rank's parts of `full` (laid out like the flat buffer) into `shard`, or back.
  void take_parts(const runtime::Tensor& shard, const runtime::Tensor& full) const;
  void gather_parts(parallel::Communicator& dp, const runtime::Tensor& full,
                    const runtime::Tensor& shard, const runtime::Tensor& staging) const;
  // AdamW on this rank's part of one bucket, split where the weight decay changes.
  void step_part(const parallel::GradBucket& bucket, const model::GptParams& grads,
                 const OptimizerConfig& config, double lr, int64_t step);

  model::GptParams params_;
  parallel::GradBucketLayout layout_;
  std::vector<int64_t> param_begin_;  // flat offset of each named parameter, then the end
  runtime::Tensor state_;             // [master part (bf16) |] exp_avg part | exp_avg_sq part
  runtime::Tensor master_part_, exp_avg_, exp_avg_sq_;  // views of state_, shard_numel each
  // dp elements each (comm), for the staged bucket: f32 gradients, compute-dtype weights.
  runtime::Tensor grad_staging_, param_staging_;
};

}  // namespace trainer
