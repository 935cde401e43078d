// build_rank_state: the allocations every rank makes once, in their one order; and one step's
// work on them, for Trainer and the replay alike.
#include "trainer/engine/rank_state.h"

#include "runtime/memory_timeline.h"
#include "runtime/ops.h"
#include "runtime/trace.h"

namespace trainer {

model::LayerGroups layer_groups(const parallel::ProcessGroups& groups) {
  return {.tp = groups.config.tensor > 1 ? groups.tp.get() : nullptr,
          .cp = groups.config.context > 1 ? groups.cp.get() : nullptr};
}

void build_rank_state(RankState& state, const Config& config, parallel::ProcessGroups& groups,
                      runtime::Allocator& allocator,
                      const std::function<void(RankState&)>& initialize) {
  state.setup = make_stage_setup(config, groups.coordinates.pp, groups.coordinates.tp,
                                 groups.cp ? groups.cp->rank() : 0);
  const model::GptConfig& m = config.model;
  const model::ModelShard& shard = state.setup.shard;
  // bf16 (Megatron's mixed precision): the model reads bf16 weights (`param`); the optimizer
  // updates fp32 master weights, counted as optimizer state like its moments (12 bytes per
  // parameter in all), and rewrites the bf16 copy in the same pass. Gradients are fp32.
  const bool bf16 = uses_bf16(config.train);
  // `name`: the buffer's in a memory timeline.
  auto allocate = [&](const char* name, runtime::MemoryCategory category, runtime::DType dtype) {
    const runtime::memory_timeline::Name timeline_name(name);
    return model::GptParams::allocate(allocator, m, shard, category, dtype);
  };
  state.params = allocate("params", runtime::MemoryCategory::param,
                          bf16 ? runtime::DType::bf16 : runtime::DType::f32);
  state.master =
      bf16 ? allocate("master_params", master_weights_category(config), runtime::DType::f32)
           : state.params;
  if (initialize) initialize(state);
  state.grads = allocate("grads", runtime::MemoryCategory::grad, runtime::DType::f32);
  runtime::ops::zero(state.grads.flat);
  state.optimizer = make_optimizer(config, groups, state.params, state.master, allocator);
  if (config.optimizer.distributed && state.has_master_copy())
    state.master = {};  // it took its parts
  for (const StageChunk& chunk : state.setup.chunks) {
    state.chunks.push_back(std::make_unique<recompute::ChunkExecutor>(
        m, state.params, state.grads, chunk.plan, state.setup.dims, layer_groups(groups),
        chunk.spec, allocator));
  }
}

void all_reduce_step_loss(parallel::ProcessGroups& groups, double& loss_sum) {
  groups.pp->all_reduce_sum(&loss_sum, 1);  // only the last stage has it
  groups.dp->all_reduce_sum(&loss_sum, 1);
}

MicrobatchRows microbatch_rows(const recompute::ChunkSpec& chunk, bool documents) {
  MicrobatchRows rows;
  if (chunk.embedding) rows.tokens = rows.count++;
  if (chunk.head) rows.targets = rows.count++;
  if (documents) rows.starts = rows.count++;
  return rows;
}

MicrobatchIds allocate_microbatch_ids(const Config& config, const StageSetup& setup,
                                      const recompute::ChunkSpec& chunk,
                                      runtime::Allocator& allocator, bool on_device) {
  MicrobatchIds ids;
  ids.rows = microbatch_rows(chunk, config.data.document_starts());
  ids.T = setup.dims.context().local_seq();
  ids.B = config.train.micro_batch_size;
  if (ids.rows.count == 0) return ids;
  auto make = [&](const char* name, const runtime::Shape& shape, runtime::MemoryCategory category) {
    const runtime::memory_timeline::Name timeline_name(name);
    return runtime::Tensor::empty(allocator, shape, runtime::DType::i32, category);
  };
  if (on_device)
    ids.uploaded =
        make("uploaded_ids", {ids.rows.count, ids.T, ids.B}, runtime::MemoryCategory::workspace);
  constexpr auto kActivation = runtime::MemoryCategory::activation;
  if (ids.rows.tokens >= 0) ids.micro.tokens = make("tokens", {ids.T, ids.B}, kActivation);
  if (ids.rows.targets >= 0) ids.micro.targets = make("targets", {ids.T, ids.B}, kActivation);
  if (ids.rows.starts >= 0) {
    ids.starts = make("document_starts", {ids.T, ids.B}, kActivation);
    attach_document_starts(ids.micro, ids.starts, config.data);
  }
  return ids;
}

void attach_document_starts(recompute::Microbatch& micro, const runtime::Tensor& starts,
                            const DataConfig& data) {
  if (data.reset_attention_mask) micro.document_starts = starts;
  if (data.reset_position_ids) micro.position_starts = starts;
}

parallel::PipelineStep make_pipeline_step(RankState& state, parallel::ProcessGroups& groups,
                                          const Config& config, int64_t step,
                                          MicrobatchSource microbatch, int64_t counted_targets) {
  parallel::PipelineStep p;
  for (const auto& chunk : state.chunks) p.chunks.push_back(chunk.get());
  p.pp = groups.pp.get();
  p.num_microbatches = state.setup.num_microbatches;
  p.microbatch = std::move(microbatch);
  p.step = recompute::StepInfo{config.train.seed, step};
  if (counted_targets > 0) {
    const int64_t replicas = config.parallel.data * config.parallel.context;
    p.loss_scale =
        static_cast<float>(static_cast<double>(replicas) / static_cast<double>(counted_targets));
    return p;
  }
  p.loss_scale = 1.0f / static_cast<float>((config.train.global_batch_size / config.parallel.data) *
                                           state.setup.dims.context().local_seq());
  return p;
}

StepGradients compute_step_gradients(RankState& state, parallel::ProcessGroups& groups,
                                     const Config& config, parallel::PipelineStep pipeline) {
  runtime::ops::zero(state.grads.flat);
  pipeline.gradients = state.optimizer->start_gradient_reduction(groups, state.grads,
                                                                 config.parallel.sequence_parallel);
  StepGradients result;
  result.loss_sum = parallel::run_schedule(state.setup.schedule, pipeline);
  all_reduce_step_loss(groups, result.loss_sum);
  const runtime::trace::Scope reduce_trace({.name = "reduce_gradients"});
  result.reduce_time =
      state.optimizer->reduce_gradients(groups, state.grads, config.parallel.sequence_parallel);
  return result;
}

void apply_update(RankState& state, parallel::ProcessGroups& groups, const Config& config,
                  double grad_norm, double lr, int64_t step) {
  const runtime::trace::Scope optimizer_trace({.name = "optimizer"});
  clip_gradients(state.grads, grad_norm, config.optimizer.clip_grad);
  state.optimizer->step(groups, state.grads, config.optimizer, lr, step);
}

}  // namespace trainer
