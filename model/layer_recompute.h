// What one layer keeps for backward: the plan entry that recompute/ resolves per
// layer and model/ obeys (DESIGN.md "Recompute semantics").
#pragma once

#include <string>

namespace model {

enum class RecomputeMode { none, full, selective };

// Selective modules: each drops that module's internal activations in forward
// and rebuilds them from its stashed inputs in backward.
struct SelectiveModules {
  bool core_attn = false;  // softmax probabilities, attention dropout mask and its output
  bool act = false;        // the GELU output (fc2's input)
  bool layernorm = false;  // both layernorms' normalized outputs (mean/rstd are kept)
  bool mlp = false;        // everything between fc1 and fc2 (fc1 output, GELU output)

  bool any() const { return core_attn || act || layernorm || mlp; }
  bool operator==(const SelectiveModules&) const = default;
};

struct LayerRecompute {
  RecomputeMode mode = RecomputeMode::none;
  SelectiveModules modules;  // only with mode == selective

  bool operator==(const LayerRecompute&) const = default;
};

// "none", "full", "selective{core_attn,act}"
std::string to_string(const LayerRecompute& entry);

}  // namespace model
