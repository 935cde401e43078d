// The selective recompute table and what is derived from it. A row changes here and
// nowhere else: the stash spec, the rebuild, the FLOPs and the gathers follow.
#include "model/recompute_modules.h"

#include <algorithm>
#include <string>

namespace model {
namespace {

bool every_block(const BlockFeatures&) {
  return true;
}
bool unfused_attention(const BlockFeatures& f) {
  return !f.flash();
}
bool flash_attention(const BlockFeatures& f) {
  return f.flash();
}

}  // namespace

const std::vector<ForwardPieceRow>& forward_piece_table() {
  using P = ForwardPiece;
  using S = LayerStash;
  using F = LayerFlops;
  static const std::vector<ForwardPieceRow> table = {
      {P::input_layernorm, {&S::ln1_out}, {}, false, every_block},
      // The unfused context GEMM is not rerun: its output is proj's input, kept.
      {P::core_attn_probs,
       {&S::probs, &S::attn_mask, &S::probs_drop},
       {&F::scores},
       false,
       unfused_attention},
      // The flash forward rebuilds the attention output O (= ctx, proj's input) and its lse.
      {P::flash_attention, {&S::ctx, &S::lse}, {&F::scores, &F::context}, false, flash_attention},
      {P::pre_mlp_layernorm, {&S::ln2_out}, {}, false, every_block},
      {P::fc1, {&S::fc1_out}, {&F::fc1}, true, every_block},
      {P::act, {&S::gelu_out}, {}, false, every_block},
  };
  return table;
}

const std::vector<SelectiveModuleRow>& selective_module_table() {
  using P = ForwardPiece;
  using M = SelectiveModules;
  static const std::vector<SelectiveModuleRow> table = {
      {"core_attn", &M::core_attn, {P::core_attn_probs, P::flash_attention}},
      {"act", &M::act, {P::act}},
      {"layernorm", &M::layernorm, {P::input_layernorm, P::pre_mlp_layernorm}},
      {"mlp", &M::mlp, {P::fc1, P::act}},
  };
  return table;
}

const ForwardPieceRow& forward_piece(ForwardPiece piece) {
  const ForwardPieceRow& row = forward_piece_table().at(static_cast<size_t>(piece));
  TRAINER_ASSERT(row.piece == piece, "forward_piece_table is not in ForwardPiece order");
  return row;
}

std::vector<ForwardPiece> rerun_pieces(const LayerRecompute& entry, const BlockFeatures& features) {
  std::vector<ForwardPiece> pieces;
  if (entry.mode != RecomputeMode::selective) return pieces;
  for (const SelectiveModuleRow& module : selective_module_table()) {
    if (!(entry.modules.*module.flag)) continue;
    for (ForwardPiece piece : module.reruns)
      if (forward_piece(piece).exists(features)) pieces.push_back(piece);
  }
  std::sort(pieces.begin(), pieces.end());
  pieces.erase(std::unique(pieces.begin(), pieces.end()), pieces.end());
  return pieces;
}

bool drops(const LayerRecompute& entry, const BlockFeatures& features, Tensor LayerStash::*member) {
  for (ForwardPiece piece : rerun_pieces(entry, features)) {
    const std::vector<Tensor LayerStash::*>& rebuilds = forward_piece(piece).rebuilds;
    if (std::find(rebuilds.begin(), rebuilds.end(), member) != rebuilds.end()) return true;
  }
  return false;
}

int64_t rebuild_input_gathers(const LayerRecompute& entry, const BlockFeatures& features) {
  const std::vector<ForwardPiece> pieces = rerun_pieces(entry, features);
  return std::count_if(pieces.begin(), pieces.end(),
                       [](ForwardPiece piece) { return forward_piece(piece).gathers_input; });
}

std::string to_string(const LayerRecompute& entry) {
  switch (entry.mode) {
    case RecomputeMode::none:
      return "none";
    case RecomputeMode::full:
      return "full";
    case RecomputeMode::selective:
      break;
  }
  std::string s = "selective{";
  const char* separator = "";
  for (const SelectiveModuleRow& module : selective_module_table()) {
    if (entry.modules.*module.flag) s += separator, s += module.name, separator = ",";
  }
  return s + "}";
}

}  // namespace model
