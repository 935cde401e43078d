// The selective recompute modules as one table: each module names the forward pieces it
// reruns in backward; each piece names the stash tensors it rebuilds, its matmul and whether
// it gathers its input. The stash spec, the rebuild and the FLOP count read it (docs/recompute.md).
#pragma once

#include <cstdint>
#include <vector>

#include "model/flops.h"
#include "model/layer_recompute.h"
#include "model/layer_stash.h"

namespace model {

// The pieces of layer_forward a selective entry may rerun, in forward order. A piece exists
// in the blocks its row's predicate holds of: core_attn_probs under the unfused attention
// backend only, flash_attention under flash only, so the core_attn module reruns whichever
// the layer runs.
enum class ForwardPiece {
  input_layernorm,
  core_attn_probs,
  flash_attention,
  pre_mlp_layernorm,
  fc1,
  act
};

struct ForwardPieceRow {
  ForwardPiece piece;
  // The stash tensors the piece writes, in forward order: a module that reruns the piece
  // drops them in forward. (The layernorms also rewrite their mean and rstd, which stay kept.)
  std::vector<Tensor LayerStash::*> rebuilds;
  std::vector<int64_t LayerFlops::*> gemms;  // its matmuls, counted as layer_forward_flops does
  bool gathers_input;  // its GEMM is column-parallel: under sequence parallelism it
                       // all-gathers its (Ts, B, C) input first
  bool (*exists)(const BlockFeatures&);  // in which blocks the layer runs the piece
};

struct SelectiveModuleRow {
  const char* name;                  // as the config spells it: `modules: [core_attn]`
  bool SelectiveModules::*flag;      // the module's switch in a plan entry
  std::vector<ForwardPiece> reruns;  // in forward order
};

// Every piece, in ForwardPiece order, and every module, in config order.
const std::vector<ForwardPieceRow>& forward_piece_table();
const std::vector<SelectiveModuleRow>& selective_module_table();
const ForwardPieceRow& forward_piece(ForwardPiece piece);

// The pieces `entry` reruns in backward in a block of `features`: those of its modules that
// exist there, each once, in forward order (none unless the entry is selective: a full layer
// reruns its whole forward).
std::vector<ForwardPiece> rerun_pieces(const LayerRecompute& entry, const BlockFeatures& features);
// Whether `entry` drops stash.*member in forward (it reruns the piece that rebuilds it).
bool drops(const LayerRecompute& entry, const BlockFeatures& features, Tensor LayerStash::*member);
// How many column-parallel GEMM inputs `entry`'s rebuild all-gathers under sequence
// parallelism, each (Ts, B, C) on a rank: communication beyond the layer's own.
int64_t rebuild_input_gathers(const LayerRecompute& entry, const BlockFeatures& features);

}  // namespace model
