// Byte counts from the parameter count and the bucket layout the optimizers allocate by.
#include "trainer/engine/optimizer_memory.h"

namespace trainer {

parallel::GradBucketLayout grad_bucket_layout(const Config& config, int64_t numel, int64_t dp_size,
                                              int64_t dp_rank) {
  return parallel::plan_grad_buckets(
      {.numel = numel,
       .bucket_numel = parallel::bucket_numel_of_mb(config.optimizer.bucket_mb),
       .dp_size = dp_size,
       .dp_rank = dp_rank});
}

OptimizerMemory predict_optimizer_memory(const Config& config, const model::ModelShard& shard,
                                         int64_t dp_size, int64_t dp_rank) {
  constexpr int64_t kFloat = 4;
  const int64_t numel = model::GptParams::count(config.model, shard);
  const bool bf16 = uses_bf16(config.train);
  const int64_t states = bf16 ? 3 : 2;  // (master weights,) exp_avg, exp_avg_sq
  const parallel::GradBucketLayout layout = grad_bucket_layout(config, numel, dp_size, dp_rank);
  OptimizerMemory memory;
  memory.grad = numel * kFloat;
  if (!config.optimizer.distributed) {
    memory.optimizer = states * numel * kFloat;
    if (dp_size > 1 && layout.has_staged_bucket()) memory.comm = dp_size * kFloat;
    return memory;
  }
  memory.optimizer = states * layout.shard_numel * kFloat;
  const int64_t weight = runtime::dtype_size(bf16 ? runtime::DType::bf16 : runtime::DType::f32);
  if (layout.has_staged_bucket()) memory.comm = dp_size * (kFloat + weight);
  return memory;
}

}  // namespace trainer
