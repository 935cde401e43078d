// A resolved recompute plan: one entry per local layer (none | full |
// selective{...}) and, for full layers, the checkpoint group each belongs to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/layer_recompute.h"

namespace recompute {

struct RecomputePlan {
  std::vector<model::LayerRecompute> layers;  // per local layer
  std::vector<int64_t> group;                 // checkpoint group id of full layers, -1 otherwise

  int64_t num_layers() const { return static_cast<int64_t>(layers.size()); }
  bool is_full(int64_t layer) const;
  // First layer of the checkpoint group that `layer` (a full layer) belongs to.
  int64_t group_start(int64_t layer) const;
  // Whether the layer's input tensor lives from forward to backward: kept by
  // the layer (none, selective) or as its group's checkpoint (first full layer).
  bool keeps_input(int64_t layer) const;

  // Layers [first, first + count) as a plan of their own (groups keep their ids).
  RecomputePlan slice(int64_t first, int64_t count) const;

  // Every layer the same entry; full layers form groups of `group_size`.
  static RecomputePlan uniform(int64_t num_layers, const model::LayerRecompute& entry,
                               int64_t group_size = 1);
};

}  // namespace recompute
