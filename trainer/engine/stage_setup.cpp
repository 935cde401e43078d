// A stage's setup from the Config, in the order the pieces depend on each other: shard and
// plan from the stage's chunks, shapes from the model and the tensor-parallel place, then the
// FLOPs and memory predictions from both.
#include "trainer/engine/stage_setup.h"

namespace trainer {
namespace {

parallel::ScheduleKind schedule_of(const parallel::ParallelConfig& parallel) {
  if (parallel.pipeline == 1) return parallel::ScheduleKind::no_pipeline;
  return parallel.virtual_pipeline > 1 ? parallel::ScheduleKind::interleaved
                                       : parallel::ScheduleKind::one_f_one_b;
}

model::LayerDims stage_dims(const Config& config, int64_t tp_rank, int64_t cp_rank) {
  const parallel::ParallelConfig& parallel = config.parallel;
  model::LayerDims dims = model::with_tensor_parallel(
      model::layer_dims(config.model, config.train.micro_batch_size, true), parallel.tensor,
      tp_rank, parallel.sequence_parallel);
  dims = model::with_context_parallel(dims, parallel.context, cp_rank);
  dims.activation_dtype = uses_bf16(config.train) ? runtime::DType::bf16 : runtime::DType::f32;
  return dims;
}

// The stage's chunks in order: the embedding runs in the first chunk of stage 0, the head in
// the last chunk of the last stage.
std::vector<StageChunk> stage_chunks(const Config& config, const StageSetup& setup,
                                     const std::vector<parallel::LayerRange>& ranges) {
  std::vector<StageChunk> chunks;
  int64_t local = 0;  // the chunk's first layer among the stage's
  for (size_t v = 0; v < ranges.size(); ++v) {
    StageChunk& chunk = chunks.emplace_back();
    chunk.layers = ranges[v];
    chunk.spec.first_param_layer = local;
    for (int64_t i = 0; i < ranges[v].count; ++i)
      chunk.spec.layer_ids.push_back(ranges[v].first + i);
    chunk.spec.embedding = setup.shard.embedding && v == 0;
    chunk.spec.head = setup.shard.head && v + 1 == ranges.size();
    chunk.plan = setup.plan.slice(local, ranges[v].count);
    chunk.memory = recompute::predict_activation_memory(config.model, setup.dims, chunk.plan, 1,
                                                        chunk.spec.embedding, chunk.spec.head,
                                                        config.data.document_starts());
    local += ranges[v].count;
  }
  return chunks;
}

// Model FLOPs of one step: forward of every layer and of the head, times 3 (backward is twice
// forward), for each microbatch.
int64_t count_model_flops(const Config& config, const StageSetup& setup) {
  const int64_t tp_size = config.parallel.tensor;
  int64_t forward_flops = 0;
  for (const StageChunk& chunk : setup.chunks) {
    forward_flops += chunk.layers.count * setup.layer_flops.total();
    if (chunk.spec.head) {
      forward_flops +=
          model::head_forward_flops(setup.dims, config.model.padded_vocab(tp_size) / tp_size);
    }
  }
  return 3 * forward_flops * setup.num_microbatches;
}

// Matmul FLOPs the plan reruns in one step: a full layer reruns its whole forward, a selective
// one the pieces its entry drops.
int64_t count_recompute_flops(const StageSetup& setup) {
  int64_t flops = 0;
  for (int64_t i = 0; i < setup.plan.num_layers(); ++i) {
    flops += setup.plan.is_full(i) ? setup.layer_flops.total()
                                   : model::selective_recompute_flops(
                                         setup.dims, setup.plan.layers[static_cast<size_t>(i)]);
  }
  return flops * setup.num_microbatches;
}

int64_t predict_peak(const Config& config, const StageSetup& setup) {
  std::vector<recompute::ActivationMemory> chunk_memory;
  for (const StageChunk& chunk : setup.chunks) chunk_memory.push_back(chunk.memory);
  const std::vector<parallel::ScheduleOp> ops =
      parallel::schedule_ops(setup.schedule, config.parallel.pipeline, setup.stage,
                             static_cast<int64_t>(setup.chunks.size()), setup.num_microbatches);
  return parallel::predict_activation_peak(ops, chunk_memory);
}

}  // namespace

StageSetup make_stage_setup(const Config& config, int64_t stage, int64_t tp_rank, int64_t cp_rank) {
  const parallel::ParallelConfig& parallel = config.parallel;
  const std::vector<parallel::LayerRange> ranges =
      parallel::stage_layer_chunks(parallel, config.model.num_layers)[static_cast<size_t>(stage)];
  StageSetup setup;
  setup.stage = stage;
  setup.num_microbatches = num_microbatches(config);
  setup.schedule = schedule_of(parallel);
  setup.shard.embedding = stage == 0;
  setup.shard.head = stage == parallel.pipeline - 1;
  setup.shard.tp_rank = tp_rank;
  setup.shard.tp_size = parallel.tensor;
  for (const parallel::LayerRange& range : ranges)
    for (int64_t i = 0; i < range.count; ++i) setup.shard.layers.push_back(range.first + i);
  setup.plan = recompute::resolve_plan(config.recompute, stage, ranges);
  setup.dims = stage_dims(config, tp_rank, cp_rank);
  setup.layer_flops = model::layer_forward_flops(setup.dims);
  setup.chunks = stage_chunks(config, setup, ranges);
  setup.model_flops_per_step = count_model_flops(config, setup);
  setup.recompute_flops_per_step = count_recompute_flops(setup);
  setup.predicted_activation_peak = predict_peak(config, setup);
  return setup;
}

}  // namespace trainer
