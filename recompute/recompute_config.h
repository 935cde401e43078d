// The `recompute:` section of a run's config (Megatron names: granularity,
// method, num_layers, modules) plus per-layer and per-stage overrides, and its
// resolution into the per-layer plan of one pipeline stage.
//   granularity: none | full | selective
//   method: uniform | block          full only; uniform: groups of num_layers
//                                    consecutive layers; block: the first
//                                    num_layers layers of each stage are full
//   modules: [core_attn, act, layernorm, mlp]   selective only (default [core_attn])
//   layers: [{range: [first, last], granularity, modules, num_layers}]  inclusive
//           ranges of global layers; win over stages and the preset
//   stages: [{stage, granularity, method, num_layers, modules}]  replace the
//           preset on one pipeline stage
//   auto: true       the planner chooses every layer's entry under train.memory_budget_gib
//                    (trainer/planning/auto_plan.h); nothing else of the section may be set
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/layer_recompute.h"
#include "parallel/core/parallel_config.h"
#include "recompute/plan.h"

namespace recompute {

enum class Method { uniform, block };

// One preset: what the top level, a stage override or a layer override says.
struct RecomputePreset {
  model::RecomputeMode granularity = model::RecomputeMode::none;
  std::optional<Method> method;       // full only (required there at top level and per stage)
  std::optional<int64_t> num_layers;  // full only: group size (uniform) or full layers (block)
  std::optional<model::SelectiveModules> modules;  // selective only; default {core_attn}
};

struct LayerOverride {
  int64_t first = 0, last = 0;  // inclusive, global layer indices
  RecomputePreset preset;       // method is not allowed; num_layers = group size (default 1)
};

struct StageOverride {
  int64_t stage = 0;
  RecomputePreset preset;
};

struct RecomputeConfig {
  RecomputePreset preset;
  std::vector<LayerOverride> layers;
  std::vector<StageOverride> stages;
  bool automatic = false;  // YAML `auto`
};

// The layers of one model chunk on one stage: global indices [first, first + count).
using ChunkLayers = parallel::LayerRange;

// Checks every rule Megatron enforces and more, given the model's layers and the
// pipeline's stage chunks (chunks[stage] lists that stage's model chunks).
// Throws runtime::ConfigError naming the YAML path ("recompute.layers[2].range").
void validate_recompute(const RecomputeConfig& config, int64_t num_layers,
                        const std::vector<std::vector<ChunkLayers>>& chunks);

// The plan of one stage: its chunks' layers in order (chunk 0 first).
RecomputePlan resolve_plan(const RecomputeConfig& config, int64_t stage,
                           const std::vector<ChunkLayers>& stage_chunks);

const char* granularity_name(model::RecomputeMode granularity);

}  // namespace recompute
