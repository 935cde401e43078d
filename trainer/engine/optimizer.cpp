// AdamW and gradient clipping over named views of the flat buffers.
#include "trainer/engine/optimizer.h"

#include "parallel/pipeline/grad_sync.h"
#include "runtime/memory_timeline.h"
#include "runtime/ops.h"
#include "trainer/engine/distributed_optimizer.h"
#include "trainer/engine/optimizer_memory.h"

namespace trainer {
namespace {

// An Adam moment (fp32, optimizer state) of `shape`; `name`: its name in a memory timeline.
runtime::Tensor moment(runtime::Allocator& allocator, const runtime::Shape& shape,
                       const char* name) {
  const runtime::memory_timeline::Name timeline_name(name);
  return runtime::Tensor::empty(allocator, shape, runtime::DType::f32,
                                runtime::MemoryCategory::optimizer);
}

}  // namespace

double clip_gradients(const model::GptParams& grads, double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  const double coeff = max_norm / (norm + 1e-6);
  if (coeff >= 1.0) return 1.0;
  runtime::ops::scale_inplace(
      {.x = grads.flat, .count = grads.flat.numel(), .scale = static_cast<float>(coeff)});
  return coeff;
}

runtime::AdamWParams adamw_hyper(const OptimizerConfig& config, double lr, int64_t step,
                                 bool weight_decay) {
  runtime::AdamWParams hyper;
  hyper.lr = static_cast<float>(lr);
  hyper.beta1 = config.adam_beta1;
  hyper.beta2 = config.adam_beta2;
  hyper.eps = config.adam_eps;
  hyper.step = step;
  hyper.weight_decay = weight_decay ? config.weight_decay : 0.f;
  return hyper;
}

recompute::GradientListener* Optimizer::start_gradient_reduction(parallel::ProcessGroups& groups,
                                                                 const model::GptParams& grads,
                                                                 bool sequence_parallel) {
  parallel::GradReducerArgs args = reduction_args();
  args.groups = &groups;
  args.grads = &grads;
  args.sequence_parallel = sequence_parallel;
  reduction_ = std::make_unique<parallel::GradReducer>(args);
  return overlap_ ? reduction_.get() : nullptr;
}

GradReduceTime Optimizer::reduce_gradients(parallel::ProcessGroups& groups,
                                           const model::GptParams& grads, bool sequence_parallel) {
  if (reduction_ == nullptr) start_gradient_reduction(groups, grads, sequence_parallel);
  reduction_->finish();
  const GradReduceTime time{reduction_->seconds_in_backward(),
                            reduction_->seconds_after_backward()};
  reduction_.reset();
  return time;
}

AdamW::AdamW(const model::GptParams& params, const model::GptParams& master,
             const parallel::GradBucketLayout& layout, runtime::Allocator& allocator, bool overlap)
    : Optimizer(overlap),
      params_(params),
      master_(master),
      layout_(layout),
      exp_avg_(moment(allocator, master.flat.shape(), "exp_avg")),
      exp_avg_sq_(moment(allocator, master.flat.shape(), "exp_avg_sq")) {
  runtime::ops::zero(exp_avg_);
  runtime::ops::zero(exp_avg_sq_);
  if (layout_.dp_size > 1 && layout_.has_staged_bucket()) {
    const runtime::memory_timeline::Name timeline_name("grad_staging");
    staging_ = runtime::Tensor::empty(allocator, {layout_.dp_size}, runtime::DType::f32,
                                      runtime::MemoryCategory::comm);
  }
}

parallel::GradReducerArgs AdamW::reduction_args() const {
  return {.layout = &layout_, .all_gather = true, .staging = staging_};
}

double AdamW::grad_norm(parallel::ProcessGroups& groups, const model::GptParams& grads,
                        bool has_embedding_stage) {
  return parallel::global_grad_norm(groups, grads, has_embedding_stage);
}

void AdamW::step(parallel::ProcessGroups&, const model::GptParams& grads,
                 const OptimizerConfig& config, double lr, int64_t step) {
  const bool copy = params_.flat.raw() != master_.flat.raw();
  int64_t offset = 0;  // named tensors tile the flat buffer in order
  for (size_t i = 0; i < master_.named.size(); ++i) {
    const model::NamedParam& p = master_.named[i];
    const int64_t n = p.tensor.numel();
    runtime::ops::adamw_step({.param = p.tensor,
                              .exp_avg = exp_avg_.view(offset, {n}),
                              .exp_avg_sq = exp_avg_sq_.view(offset, {n}),
                              .param_copy = copy ? params_.named[i].tensor : runtime::Tensor(),
                              .grad = grads.named[i].tensor,
                              .count = n,
                              .hyper = adamw_hyper(config, lr, step, p.weight_decay)});
    offset += n;
  }
}

OptimizerState AdamW::full_state(parallel::Communicator&, runtime::Allocator&) {
  return {master_.flat, exp_avg_, exp_avg_sq_};
}

void AdamW::load_full_state(const OptimizerState& state) {
  TRAINER_ASSERT(state.master.raw() == master_.flat.raw() && state.exp_avg.raw() == exp_avg_.raw(),
                 "AdamW::load_full_state takes the tensors of its own full_state");
  if (params_.flat.raw() != master_.flat.raw()) runtime::ops::convert(params_.flat, master_.flat);
}

std::unique_ptr<Optimizer> make_optimizer(const Config& config, parallel::ProcessGroups& groups,
                                          const model::GptParams& params,
                                          const model::GptParams& master,
                                          runtime::Allocator& allocator) {
  const parallel::GradBucketLayout layout =
      grad_bucket_layout(config, params.flat.numel(), groups.dp->size(), groups.dp->rank());
  const bool overlap = config.optimizer.overlap_grad_reduce;
  if (!config.optimizer.distributed)
    return std::make_unique<AdamW>(params, master, layout, allocator, overlap);
  return std::make_unique<DistributedAdamW>(
      DistributedAdamW::Args{
          .params = params, .master = master, .layout = layout, .overlap = overlap},
      allocator);
}

}  // namespace trainer
