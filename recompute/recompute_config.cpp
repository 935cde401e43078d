// Validation and resolution of the recompute config into per-stage plans.
// Rules: overrides win (layer > stage > top level); full groups never cross a
// model chunk; group ids are unique within a plan.
#include "recompute/recompute_config.h"

#include <algorithm>
#include <string>

#include "runtime/error.h"

namespace recompute {
namespace {

using model::LayerRecompute;
using model::RecomputeMode;
using runtime::ConfigError;

const model::SelectiveModules kDefaultModules{.core_attn = true};

// Rules shared by the top level and stage overrides.
void validate_preset(const RecomputePreset& p, const std::string& path, bool method_allowed) {
  const bool full = p.granularity == RecomputeMode::full;
  const std::string g = granularity_name(p.granularity);
  if (p.method && (!full || !method_allowed)) {
    throw ConfigError(path + ".method",
                      full ? "not allowed in a layer override (use num_layers for the group size)"
                           : "not allowed with granularity " + g + " (only with full)");
  }
  if (full && method_allowed && !p.method) {
    throw ConfigError(path + ".method", "required with granularity full (uniform or block)");
  }
  if (p.num_layers && !full) {
    throw ConfigError(path + ".num_layers",
                      "not allowed with granularity " + g + " (only with full)");
  }
  if (p.num_layers && *p.num_layers < 1) {
    throw ConfigError(path + ".num_layers", "must be >= 1, got " + std::to_string(*p.num_layers));
  }
  if (p.modules && p.granularity != RecomputeMode::selective) {
    throw ConfigError(path + ".modules",
                      "not allowed with granularity " + g + " (only with selective)");
  }
  if (p.modules && !p.modules->any()) {
    throw ConfigError(path + ".modules",
                      "must name at least one of core_attn, act, layernorm, mlp");
  }
}

void check_num_layers_fit(const RecomputePreset& p, const std::string& path,
                          const std::vector<ChunkLayers>& chunks, int64_t stage) {
  if (p.granularity != RecomputeMode::full || !p.num_layers) return;
  for (const ChunkLayers& chunk : chunks) {
    if (*p.num_layers > chunk.count) {
      throw ConfigError(
          path + ".num_layers",
          TRAINER_STR(*p.num_layers << " > " << chunk.count
                                    << " layers in a model chunk of pipeline stage " << stage));
    }
  }
}

LayerRecompute entry_of(const RecomputePreset& p) {
  switch (p.granularity) {
    case RecomputeMode::none:
      return {};
    case RecomputeMode::full:
      return {RecomputeMode::full, {}};
    case RecomputeMode::selective:
      return {RecomputeMode::selective, p.modules.value_or(kDefaultModules)};
  }
  return {};
}

// Marks layers [begin, end) of `plan` (local indices) full in groups of `group_size`.
void mark_full(RecomputePlan& plan, int64_t begin, int64_t end, int64_t group_size,
               int64_t* next_group) {
  for (int64_t i = begin; i < end; ++i) {
    if ((i - begin) % group_size == 0) ++*next_group;
    plan.layers[static_cast<size_t>(i)] = {RecomputeMode::full, {}};
    plan.group[static_cast<size_t>(i)] = *next_group;
  }
}

}  // namespace

const char* granularity_name(RecomputeMode g) {
  switch (g) {
    case RecomputeMode::none:
      return "none";
    case RecomputeMode::full:
      return "full";
    case RecomputeMode::selective:
      return "selective";
  }
  return "?";
}

void validate_recompute(const RecomputeConfig& c, int64_t num_layers,
                        const std::vector<std::vector<ChunkLayers>>& chunks) {
  const int64_t stages = static_cast<int64_t>(chunks.size());
  if (c.automatic &&
      (c.preset.granularity != RecomputeMode::none || c.preset.method || c.preset.num_layers ||
       c.preset.modules || !c.layers.empty() || !c.stages.empty())) {
    throw ConfigError("recompute.auto",
                      "the planner chooses every layer: remove recompute.granularity, method, "
                      "num_layers, modules, layers and stages, or set auto to false");
  }
  validate_preset(c.preset, "recompute", true);
  std::vector<bool> stage_seen(static_cast<size_t>(stages), false);
  for (size_t i = 0; i < c.stages.size(); ++i) {
    const StageOverride& s = c.stages[i];
    const std::string path = "recompute.stages[" + std::to_string(i) + "]";
    if (s.stage < 0 || s.stage >= stages) {
      throw ConfigError(path + ".stage",
                        TRAINER_STR(s.stage << " is not a pipeline stage (parallel.pipeline "
                                            << stages << ": stages 0.." << stages - 1 << ")"));
    }
    if (stage_seen[static_cast<size_t>(s.stage)]) {
      throw ConfigError(path + ".stage", TRAINER_STR("stage " << s.stage << " has two overrides"));
    }
    stage_seen[static_cast<size_t>(s.stage)] = true;
    validate_preset(s.preset, path, true);
    check_num_layers_fit(s.preset, path, chunks[static_cast<size_t>(s.stage)], s.stage);
  }
  for (int64_t stage = 0; stage < stages; ++stage) {
    if (!stage_seen[static_cast<size_t>(stage)])
      check_num_layers_fit(c.preset, "recompute", chunks[static_cast<size_t>(stage)], stage);
  }
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerOverride& l = c.layers[i];
    const std::string path = "recompute.layers[" + std::to_string(i) + "]";
    if (l.first < 0 || l.first > l.last) {
      throw ConfigError(
          path + ".range",
          TRAINER_STR("[" << l.first << ", " << l.last
                          << "] is not a range of layers (first <= last, both >= 0)"));
    }
    if (l.last >= num_layers) {
      throw ConfigError(
          path + ".range",
          TRAINER_STR("last " << l.last << " >= num_layers " << num_layers
                              << " (ranges are inclusive, layers 0.." << num_layers - 1 << ")"));
    }
    for (size_t j = 0; j < i; ++j) {
      const LayerOverride& o = c.layers[j];
      if (l.first <= o.last && o.first <= l.last) {
        throw ConfigError(
            path + ".range",
            TRAINER_STR("[" << l.first << ", " << l.last << "] overlaps recompute.layers[" << j
                            << "].range [" << o.first << ", " << o.last << "]"));
      }
    }
    validate_preset(l.preset, path, false);
    if (l.preset.num_layers && *l.preset.num_layers > l.last - l.first + 1) {
      throw ConfigError(path + ".num_layers",
                        TRAINER_STR(*l.preset.num_layers << " > " << l.last - l.first + 1
                                                         << " layers in the range"));
    }
  }
}

RecomputePlan resolve_plan(const RecomputeConfig& c, int64_t stage,
                           const std::vector<ChunkLayers>& stage_chunks) {
  RecomputePreset preset = c.preset;
  for (const StageOverride& s : c.stages)
    if (s.stage == stage) preset = s.preset;

  int64_t total = 0;
  for (const ChunkLayers& chunk : stage_chunks) total += chunk.count;
  RecomputePlan plan = RecomputePlan::uniform(total, {});
  int64_t next_group = -1;
  int64_t local = 0;  // local index of the chunk's first layer
  for (const ChunkLayers& chunk : stage_chunks) {
    const int64_t end = local + chunk.count;
    if (preset.granularity == RecomputeMode::full) {
      const int64_t n = std::min(preset.num_layers.value_or(1), chunk.count);
      if (preset.method.value_or(Method::uniform) == Method::uniform) {
        mark_full(plan, local, end, n, &next_group);
      } else {
        for (int64_t i = local; i < local + n; ++i) mark_full(plan, i, i + 1, 1, &next_group);
      }
    } else {
      for (int64_t i = local; i < end; ++i) plan.layers[static_cast<size_t>(i)] = entry_of(preset);
    }
    for (const LayerOverride& o : c.layers) {
      const int64_t first = std::max(o.first, chunk.first);
      const int64_t last = std::min(o.last, chunk.first + chunk.count - 1);
      if (first > last) continue;
      const int64_t begin = local + first - chunk.first, stop = local + last - chunk.first + 1;
      if (o.preset.granularity == RecomputeMode::full) {
        mark_full(plan, begin, stop, o.preset.num_layers.value_or(1), &next_group);
      } else {
        for (int64_t i = begin; i < stop; ++i) {
          plan.layers[static_cast<size_t>(i)] = entry_of(o.preset);
          plan.group[static_cast<size_t>(i)] = -1;
        }
      }
    }
    local = end;
  }
  // Renumber: an override may have split a preset group; each contiguous run of
  // one id is its own group, numbered in layer order.
  const std::vector<int64_t> old = plan.group;
  int64_t id = -1;
  for (size_t i = 0; i < old.size(); ++i) {
    if (old[i] < 0) continue;
    const bool continues = i > 0 && old[i - 1] == old[i];
    plan.group[i] = continues ? id : ++id;
  }
  return plan;
}

}  // namespace recompute
