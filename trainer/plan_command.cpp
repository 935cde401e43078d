// The plan table: per layer its entry, checkpoint group, kept and rebuilt bytes;
// per stage the predicted activation peak and the recompute FLOPs per step.
#include "trainer/plan_command.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "model/flops.h"
#include "recompute/memory_model.h"
#include "trainer/metrics.h"
#include "trainer/stage_setup.h"

namespace trainer {

namespace {

// One stage's table: its layers with their entries and bytes, then the stage's totals.
void print_stage(const Config& config, const StageSetup& setup, std::ostream& out) {
  const int64_t stage = setup.stage, pipeline = config.parallel.pipeline;
  const recompute::RecomputePlan& plan = setup.plan;
  const model::LayerDims& dims = setup.dims;
  // The stage's layers as one chunk, one microbatch: the per-layer bytes of the table.
  const auto memory = recompute::predict_activation_memory(config.model, dims, plan, 1, stage == 0,
                                                           stage == pipeline - 1);
  const int64_t in_flight = pipeline == 1 ? 1 : std::min(pipeline - stage, setup.num_microbatches);
  out << "\nstage " << stage << " (1F1B: up to " << in_flight << " microbatch"
      << (in_flight > 1 ? "es" : "") << " in flight)\n";
  out << "  layer | entry                                   | group |"
         "         kept |      rebuilt\n";
  char line[256];
  int64_t recompute_flops = 0;
  int64_t local = 0;
  for (const StageChunk& chunk : setup.chunks) {
    for (int64_t i = 0; i < chunk.layers.count; ++i, ++local) {
      const size_t li = static_cast<size_t>(local);
      const recompute::LayerMemory& lm = memory.layers[li];
      const bool full = plan.is_full(local);
      const std::string group = full ? std::to_string(plan.group[li]) : "-";
      recompute_flops += full ? setup.layer_flops.total()
                              : model::selective_recompute_flops(dims, plan.layers[li]);
      const int64_t rebuilt =
          full ? model::stash_kept_bytes(model::layer_stash_spec(dims, {})) : lm.rebuilt;
      std::snprintf(line, sizeof line, "  %5lld | %-39s | %5s | %12s | %12s\n",
                    static_cast<long long>(chunk.layers.first + i),
                    model::to_string(plan.layers[li]).c_str(), group.c_str(),
                    format_bytes(lm.kept + lm.checkpoint).c_str(), format_bytes(rebuilt).c_str());
      out << line;
    }
  }
  const int64_t model_flops = 3 * plan.num_layers() * setup.layer_flops.total();
  std::snprintf(
      line, sizeof line,
      "  embedding %s, head %s; per microbatch: forward end %s, backward peak %s\n"
      "  predicted activation peak (per rank of this stage): %s\n"
      "  recompute: %.3f GFLOP per microbatch (%.1f%% of the layers' model FLOPs)\n",
      format_bytes(memory.embedding).c_str(), format_bytes(memory.head).c_str(),
      format_bytes(memory.forward_end).c_str(), format_bytes(memory.backward_peak).c_str(),
      format_bytes(setup.predicted_activation_peak).c_str(),
      static_cast<double>(recompute_flops) / 1e9,
      model_flops > 0
          ? 100.0 * static_cast<double>(recompute_flops) / static_cast<double>(model_flops)
          : 0.0);
  out << line;
}

}  // namespace

void print_plan(const Config& config, const std::string& source, std::ostream& out) {
  std::vector<StageSetup> stages;
  for (int64_t stage = 0; stage < config.parallel.pipeline; ++stage)
    stages.push_back(make_stage_setup(config, stage, 0));
  const model::LayerDims& dims = stages[0].dims;
  char line[256];
  std::snprintf(line, sizeof line,
                "recompute plan of %s: micro batch %lld, seq %lld, hidden %lld, heads %lld, "
                "%s attention, %s activations, %lld microbatches per step\n",
                source.c_str(), static_cast<long long>(dims.micro_batch),
                static_cast<long long>(dims.seq), static_cast<long long>(dims.hidden),
                static_cast<long long>(dims.heads), model::attention_backend_name(dims.attention),
                std::string(runtime::dtype_name(dims.activation_dtype)).c_str(),
                static_cast<long long>(stages[0].num_microbatches));
  out << line;
  for (const StageSetup& setup : stages) print_stage(config, setup, out);
}

}  // namespace trainer
