// The sharded AdamW: parts of buckets in, reductions and gathers bucket by bucket in the
// layout's order, the update element by element as the replicated optimizer does it.
#include "trainer/engine/distributed_optimizer.h"

#include <algorithm>

#include "parallel/pipeline/grad_sync.h"
#include "runtime/memory_timeline.h"
#include "runtime/ops.h"

namespace trainer {

using runtime::Tensor;

DistributedAdamW::DistributedAdamW(const Args& args, runtime::Allocator& allocator)
    : Optimizer(args.overlap), params_(args.params), layout_(args.layout) {
  int64_t offset = 0;  // named tensors tile the flat buffer in order
  for (const model::NamedParam& p : params_.named) {
    param_begin_.push_back(offset);
    offset += p.tensor.numel();
  }
  param_begin_.push_back(offset);
  const bool separate_master = args.master.flat.raw() != params_.flat.raw();
  const int64_t n = layout_.shard_numel, parts = separate_master ? 3 : 2;
  const runtime::memory_timeline::Name state_name("optimizer_state_shard");
  state_ = Tensor::empty(allocator, {parts * n}, runtime::DType::f32,
                         runtime::MemoryCategory::optimizer);
  runtime::ops::zero(state_);
  if (separate_master) master_part_ = state_.view(0, {n});
  exp_avg_ = state_.view((parts - 2) * n, {n});
  exp_avg_sq_ = state_.view((parts - 1) * n, {n});
  if (separate_master) take_parts(master_part_, args.master.flat);
  if (layout_.has_staged_bucket()) {
    const int64_t dp = layout_.dp_size;
    const runtime::memory_timeline::Name grad_name("grad_staging");
    grad_staging_ =
        Tensor::empty(allocator, {dp}, runtime::DType::f32, runtime::MemoryCategory::comm);
    const runtime::memory_timeline::Name param_name("param_staging");
    param_staging_ =
        Tensor::empty(allocator, {dp}, params_.flat.dtype(), runtime::MemoryCategory::comm);
    runtime::ops::zero(param_staging_);
  }
}

void DistributedAdamW::take_parts(const Tensor& shard, const Tensor& full) const {
  for (const parallel::GradBucket& bucket : layout_.buckets) {
    const parallel::FlatRange own = layout_.owned(bucket);
    const int64_t n = own.end - own.begin;
    if (n > 0) runtime::ops::copy(shard.view(bucket.shard_offset, {n}), full.view(own.begin, {n}));
  }
}

void DistributedAdamW::gather_parts(parallel::Communicator& dp, const Tensor& full,
                                    const Tensor& shard, const Tensor& staging) const {
  for (const parallel::GradBucket& bucket : layout_.buckets) {
    const parallel::FlatRange own = layout_.owned(bucket);
    const int64_t n = own.end - own.begin;
    if (n > 0) runtime::ops::copy(full.view(own.begin, {n}), shard.view(bucket.shard_offset, {n}));
    parallel::all_gather_bucket(dp, layout_, bucket, full, staging);
  }
}

parallel::GradReducerArgs DistributedAdamW::reduction_args() const {
  return {.layout = &layout_, .all_gather = false, .staging = grad_staging_};
}

double DistributedAdamW::grad_norm(parallel::ProcessGroups& groups, const model::GptParams& grads,
                                   bool has_embedding_stage) {
  const std::vector<parallel::FlatRange> owned = layout_.owned_ranges();
  return parallel::global_grad_norm(groups, grads, has_embedding_stage, &owned);
}

void DistributedAdamW::step_part(const parallel::GradBucket& bucket, const model::GptParams& grads,
                                 const OptimizerConfig& config, double lr, int64_t step) {
  const parallel::FlatRange own = layout_.owned(bucket);
  // The named parameters overlapping [own.begin, own.end), each its own update call.
  auto first = std::upper_bound(param_begin_.begin(), param_begin_.end(), own.begin);
  for (auto i = static_cast<size_t>(first - param_begin_.begin()) - 1;
       i + 1 < param_begin_.size() && param_begin_[i] < own.end; ++i) {
    const int64_t begin = std::max(param_begin_[i], own.begin);
    const int64_t n = std::min(param_begin_[i + 1], own.end) - begin;
    if (n <= 0) continue;
    const int64_t at = bucket.shard_offset + (begin - own.begin);  // in the shard
    const Tensor weights = params_.flat.view(begin, {n});
    runtime::ops::adamw_step(
        {.param = has_master_part() ? master_part_.view(at, {n}) : weights,
         .exp_avg = exp_avg_.view(at, {n}),
         .exp_avg_sq = exp_avg_sq_.view(at, {n}),
         .param_copy = has_master_part() ? weights : Tensor(),
         .grad = grads.flat.view(begin, {n}),
         .count = n,
         .hyper = adamw_hyper(config, lr, step, params_.named[i].weight_decay)});
  }
}

void DistributedAdamW::step(parallel::ProcessGroups& groups, const model::GptParams& grads,
                            const OptimizerConfig& config, double lr, int64_t step) {
  for (const parallel::GradBucket& bucket : layout_.buckets) {
    if (layout_.owned(bucket).end > layout_.owned(bucket).begin)
      step_part(bucket, grads, config, lr, step);
  }
  for (const parallel::GradBucket& bucket : layout_.buckets)
    parallel::all_gather_bucket(*groups.dp, layout_, bucket, params_.flat, param_staging_);
}

OptimizerState DistributedAdamW::full_state(parallel::Communicator& dp,
                                            runtime::Allocator& scratch) {
  const int64_t n = params_.flat.numel();
  const int64_t gathered = has_master_part() ? 3 : 2;
  const Tensor full = Tensor::empty(scratch, {gathered * n}, runtime::DType::f32,
                                    runtime::MemoryCategory::workspace);
  const Tensor staging = layout_.has_staged_bucket()
                             ? Tensor::empty(scratch, {layout_.dp_size}, runtime::DType::f32,
                                             runtime::MemoryCategory::workspace)
                             : Tensor();
  if (staging.defined()) runtime::ops::zero(staging);
  OptimizerState state;
  state.master = has_master_part() ? full.view(0, {n}) : params_.flat;
  state.exp_avg = full.view((gathered - 2) * n, {n});
  state.exp_avg_sq = full.view((gathered - 1) * n, {n});
  if (has_master_part()) gather_parts(dp, state.master, master_part_, staging);
  gather_parts(dp, state.exp_avg, exp_avg_, staging);
  gather_parts(dp, state.exp_avg_sq, exp_avg_sq_, staging);
  return state;
}

void DistributedAdamW::load_full_state(const OptimizerState& state) {
  if (has_master_part()) {
    take_parts(master_part_, state.master);
    runtime::ops::convert(params_.flat, state.master);
  }
  take_parts(exp_avg_, state.exp_avg);
  take_parts(exp_avg_sq_, state.exp_avg_sq);
}

}  // namespace trainer
