// Queries on a resolved plan.
#include "recompute/plan.h"

#include "runtime/error.h"

namespace recompute {

bool RecomputePlan::is_full(int64_t layer) const {
  return layers.at(static_cast<size_t>(layer)).mode == model::RecomputeMode::full;
}

int64_t RecomputePlan::group_start(int64_t layer) const {
  TRAINER_ASSERT(is_full(layer), "layer " << layer << " is not full");
  const int64_t id = group[static_cast<size_t>(layer)];
  int64_t start = layer;
  while (start > 0 && is_full(start - 1) && group[static_cast<size_t>(start - 1)] == id) --start;
  return start;
}

bool RecomputePlan::keeps_input(int64_t layer) const {
  return !is_full(layer) || group_start(layer) == layer;
}

RecomputePlan RecomputePlan::slice(int64_t first, int64_t count) const {
  TRAINER_ASSERT(first >= 0 && first + count <= num_layers(), "slice out of the plan");
  RecomputePlan part;
  part.layers.assign(layers.begin() + first, layers.begin() + first + count);
  part.group.assign(group.begin() + first, group.begin() + first + count);
  return part;
}

RecomputePlan RecomputePlan::uniform(int64_t num_layers, const model::LayerRecompute& entry,
                                     int64_t group_size) {
  TRAINER_ASSERT(group_size >= 1, "group size " << group_size);
  RecomputePlan plan;
  plan.layers.assign(static_cast<size_t>(num_layers), entry);
  plan.group.assign(static_cast<size_t>(num_layers), -1);
  if (entry.mode == model::RecomputeMode::full) {
    for (int64_t i = 0; i < num_layers; ++i) plan.group[static_cast<size_t>(i)] = i / group_size;
  }
  return plan;
}

}  // namespace recompute
