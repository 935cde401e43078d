// What one layer keeps for backward: the plan entry that recompute/ resolves per
// layer and model/ obeys (docs/recompute.md).
#pragma once

#include <string>

namespace model {

enum class RecomputeMode { none, full, selective };

// Selective modules (Megatron's names): each drops that module's internal activations
// in forward and reruns the module in backward from its stashed inputs. Which tensors
// each drops and which forward pieces it reruns: the table in model/recompute_modules.h.
struct SelectiveModules {
  bool core_attn = false;  // softmax(q k^T) and its dropout
  bool act = false;        // the GELU
  bool layernorm = false;  // both layernorms
  bool mlp = false;        // fc1 and the GELU

  bool any() const { return core_attn || act || layernorm || mlp; }
  // The modules as bits: core_attn 1, act 2, layernorm 4, mlp 8 (0 to 15).
  int mask() const { return int{core_attn} | int{act} << 1 | int{layernorm} << 2 | int{mlp} << 3; }
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
