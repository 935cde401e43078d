// The plan table: per layer its entry, checkpoint group, kept and rebuilt bytes;
// per stage the predicted activation peak and the recompute FLOPs per step.
#include "trainer/plan_command.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "model/flops.h"
#include "recompute/executor.h"
#include "parallel/pipeline/schedules.h"
#include "recompute/memory_model.h"
#include "trainer/metrics.h"

namespace trainer {

void print_plan(const Config& config, const std::string& source, std::ostream& out) {
  const model::GptConfig& m = config.model;
  const parallel::ParallelConfig& p = config.parallel;
  model::LayerDims dims = model::with_tensor_parallel(
      model::layer_dims(m, config.train.micro_batch_size, true), nullptr, p.tensor, 0,
      p.sequence_parallel);
  dims.activation_dtype =
      uses_bf16(config.train) ? runtime::DType::bf16 : runtime::DType::f32;
  const int64_t microbatches =
      config.train.global_batch_size / (config.train.micro_batch_size * p.data);
  const auto chunks = parallel::stage_layer_chunks(p, m.num_layers);
  const model::LayerFlops layer_flops = model::layer_forward_flops(dims);

  char line[256];
  std::snprintf(line, sizeof line,
                "recompute plan of %s: micro batch %lld, seq %lld, hidden %lld, heads %lld, "
                "%s activations, %lld microbatches per step\n",
                source.c_str(), static_cast<long long>(dims.micro_batch),
                static_cast<long long>(dims.seq), static_cast<long long>(dims.hidden),
                static_cast<long long>(dims.heads),
                std::string(runtime::dtype_name(dims.activation_dtype)).c_str(),
                static_cast<long long>(microbatches));
  out << line;
  for (int64_t stage = 0; stage < p.pipeline; ++stage) {
    const auto& stage_chunks = chunks[static_cast<size_t>(stage)];
    const recompute::RecomputePlan plan = recompute::resolve_plan(config.recompute, stage, stage_chunks);
    // The stage's peak over its schedule, chunk by chunk, as the trainer predicts it.
    std::vector<recompute::ActivationMemory> chunk_memory;
    int64_t first = 0;
    for (size_t v = 0; v < stage_chunks.size(); ++v) {
      chunk_memory.push_back(recompute::predict_activation_memory(
          m, dims, plan.slice(first, stage_chunks[v].count), 1, stage == 0 && v == 0,
          stage == p.pipeline - 1 && v + 1 == stage_chunks.size()));
      first += stage_chunks[v].count;
    }
    const auto kind = p.pipeline == 1          ? parallel::ScheduleKind::no_pipeline
                      : p.virtual_pipeline > 1 ? parallel::ScheduleKind::interleaved
                                               : parallel::ScheduleKind::one_f_one_b;
    const int64_t stage_peak = parallel::predict_activation_peak(
        parallel::schedule_ops(kind, p.pipeline, stage, static_cast<int64_t>(stage_chunks.size()),
                               microbatches),
        chunk_memory);
    const auto memory = recompute::predict_activation_memory(m, dims, plan, 1, stage == 0,
                                                             stage == p.pipeline - 1);
    const int64_t in_flight = p.pipeline == 1 ? 1 : std::min(p.pipeline - stage, microbatches);
    out << "\nstage " << stage << " (1F1B: up to " << in_flight << " microbatch"
        << (in_flight > 1 ? "es" : "") << " in flight)\n";
    out << "  layer | entry                                   | group |         kept |      rebuilt\n";
    int64_t recompute_flops = 0;
    int64_t local = 0;
    for (const auto& chunk : stage_chunks) {
      for (int64_t i = 0; i < chunk.count; ++i, ++local) {
        const size_t li = static_cast<size_t>(local);
        const recompute::LayerMemory& lm = memory.layers[li];
        const bool full = plan.is_full(local);
        const std::string group = full ? std::to_string(plan.group[li]) : "-";
        recompute_flops += full ? layer_flops.total()
                                : model::selective_recompute_flops(dims, plan.layers[li]);
        const int64_t rebuilt =
            full ? model::stash_kept_bytes(model::layer_stash_spec(dims, {})) : lm.rebuilt;
        std::snprintf(line, sizeof line, "  %5lld | %-39s | %5s | %12s | %12s\n",
                      static_cast<long long>(chunk.first + i),
                      model::to_string(plan.layers[li]).c_str(), group.c_str(),
                      format_bytes(lm.kept + lm.checkpoint).c_str(), format_bytes(rebuilt).c_str());
        out << line;
      }
    }
    const int64_t model_flops = 3 * static_cast<int64_t>(plan.num_layers()) * layer_flops.total();
    std::snprintf(line, sizeof line,
                  "  embedding %s, head %s; per microbatch: forward end %s, backward peak %s\n"
                  "  predicted activation peak (per rank of this stage): %s\n"
                  "  recompute: %.3f GFLOP per microbatch (%.1f%% of the layers' model FLOPs)\n",
                  format_bytes(memory.embedding).c_str(), format_bytes(memory.head).c_str(),
                  format_bytes(memory.forward_end).c_str(),
                  format_bytes(memory.backward_peak).c_str(), format_bytes(stage_peak).c_str(),
                  static_cast<double>(recompute_flops) / 1e9,
                  model_flops > 0 ? 100.0 * static_cast<double>(recompute_flops) /
                                        static_cast<double>(model_flops)
                                  : 0.0);
    out << line;
  }
}

}  // namespace trainer
