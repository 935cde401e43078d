// FLOP counts from the same shapes the layer's GEMMs use; what recompute reruns comes from
// the recompute table (model/recompute_modules.h).
#include "model/flops.h"

#include <algorithm>

#include "model/recompute_modules.h"

namespace model {

LayerFlops layer_forward_flops(const LayerDims& d) {
  const int64_t rows = d.seq * d.micro_batch, C = d.hidden, HD = d.heads * d.head_dim;
  // This rank's T queries against every key of the sequence (T x cp of them), or against the
  // window's keys when it is shorter.
  const int64_t BH = d.micro_batch * d.heads, T = d.seq, D = d.head_dim;
  const int64_t window = d.features.window, sequence = d.context().seq;
  const int64_t keys = window > 0 ? std::min(window, sequence) : sequence;
  LayerFlops f;
  f.qkv = 2 * rows * C * d.qkv_width();
  f.scores = 2 * BH * T * keys * D;
  f.context = 2 * BH * T * keys * D;
  f.proj = 2 * rows * HD * C;
  f.fc1 = 2 * rows * C * d.fc1_width();
  f.fc2 = 2 * rows * d.ffn * C;
  return f;
}

int64_t head_forward_flops(const LayerDims& d, int64_t padded_vocab) {
  return 2 * d.seq * d.micro_batch * d.hidden * padded_vocab;
}

int64_t selective_recompute_flops(const LayerDims& d, const LayerRecompute& entry) {
  const LayerFlops forward = layer_forward_flops(d);
  int64_t flops = 0;
  for (ForwardPiece piece : rerun_pieces(entry, d.features))
    for (int64_t LayerFlops::*gemm : forward_piece(piece).gemms) flops += forward.*gemm;
  return flops;
}

}  // namespace model
