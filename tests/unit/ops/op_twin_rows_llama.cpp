// The twin rows of the Llama-family blocks' operators: RMSNorm, SwiGLU, the rotary embedding
// (Note [Rotary layout]) and the query and key heads' norms, each over odd sizes (channels and
// widths that are no multiple of a warp or a vector pack, and some that are, to reach the packed
// paths) and, for the rotary embedding, every group size and positions far past the first.
#include <utility>
#include <vector>

#include "runtime/ops.h"
#include "tests/unit/ops/twin_row.h"

namespace op_twins {
namespace {

namespace ops = runtime::ops;

// (rows, channels) of RMSNorm: many rows (past the 256 row chunks of the CUDA dweight) of few
// channels, or few rows of many channels (past a block of 256 threads times a pack).
std::pair<int64_t, int64_t> norm_rows_and_channels(Case& c) {
  if (c.coin()) return {c.pick({1, 33, 70, 1031}), c.pick({1, 7, 33, 100, 129, 256})};
  return {c.pick({1, 3, 7, 33, 70}), c.pick({100, 129, 256, 1031, 4099})};
}

// The weight of a norm: a tensor of its own, or a view that is not 16-byte aligned.
Tensor norm_weight(Case& c, int64_t channels) {
  return c.pick({0, 0, 1}) == 0 ? c.act({channels}) : c.misaligned_act({channels});
}

float norm_eps(Case& c) {
  return c.coin() ? 1e-5f : 1e-6f;
}

Row rmsnorm_forward_row() {
  return TWIN_ROW(rmsnorm_forward, kReordered, [](Case& c) {
    const auto [rows, channels] = norm_rows_and_channels(c);
    return ops::RmsnormForward{.out = c.act({rows, channels}),
                               .rstd = c.f32({rows}),
                               .input = c.act({rows, channels}, -2.f, 2.f),
                               .weight = norm_weight(c, channels),
                               .rows = rows,
                               .channels = channels,
                               .eps = norm_eps(c)};
  });
}

Row rmsnorm_backward_row() {
  return TWIN_ROW(rmsnorm_backward, kReordered, [](Case& c) {
    const auto [rows, channels] = norm_rows_and_channels(c);
    ops::RmsnormForward forward{.out = c.act({rows, channels}),
                                .rstd = c.f32({rows}),
                                .input = c.act({rows, channels}, -2.f, 2.f),
                                .weight = norm_weight(c, channels),
                                .rows = rows,
                                .channels = channels,
                                .eps = norm_eps(c)};
    ops::rmsnorm_forward(forward);  // statistics that belong to the input
    return ops::RmsnormBackward{.dinput = c.act({rows, channels}),
                                .dweight = c.f32({channels}),
                                .dout = c.act({rows, channels}),
                                .input = forward.input,
                                .weight = forward.weight,
                                .rstd = forward.rstd,
                                .rows = rows,
                                .channels = channels};
  });
}

// (rows, ffn) of SwiGLU.
std::pair<int64_t, int64_t> swiglu_shape(Case& c) {
  return {c.pick({1, 3, 7, 33, 70}), c.pick({1, 7, 33, 100, 129, 256, 1031})};
}

Row swiglu_forward_row() {
  return TWIN_ROW(swiglu_forward, kReordered, [](Case& c) {
    const auto [rows, ffn] = swiglu_shape(c);
    return ops::SwigluForward{.out = c.act({rows, ffn}),
                              .input = c.act({rows, 2 * ffn}, -4.f, 4.f),
                              .rows = rows,
                              .ffn = ffn};
  });
}

Row swiglu_backward_row() {
  return TWIN_ROW(swiglu_backward, kReordered, [](Case& c) {
    const auto [rows, ffn] = swiglu_shape(c);
    const Tensor input = c.act({rows, 2 * ffn}, -4.f, 4.f);
    return ops::SwigluBackward{.dinput = c.coin() ? input : c.act({rows, 2 * ffn}),
                               .dout = c.act({rows, ffn}),
                               .input = input,
                               .rows = rows,
                               .ffn = ffn};
  });
}

// The shape of one rotary call (Note [Rotary layout]).
struct RopeShape {
  int64_t seq, micro_batch, kv_heads, group_size, head_dim, seq_offset;
  float base;
  runtime::RopeScaling scaling;  // Llama 3.1's (factor 32) or none
  int64_t width() const { return kv_heads * (group_size + 2) * head_dim; }
};

RopeShape rope_shape(Case& c) {
  return RopeShape{
      .seq = c.pick({1, 3, 7, 33}),
      .micro_batch = c.pick({1, 2, 3}),
      .kv_heads = c.pick({1, 2, 3}),
      .group_size = c.pick({1, 2, 4}),
      .head_dim = c.pick({8, 14, 32, 64, 96, 128}),
      .seq_offset = c.pick({0, 5, 4097, 100000}),
      .base = c.coin() ? 10000.f : 500000.f,
      .scaling = c.coin() ? runtime::RopeScaling{.factor = 32.f} : runtime::RopeScaling{}};
}

// RopeForward or RopeBackward (the same fields in the same order) of a random shape, with
// documents in three cases of four.
template <class Args>
Args rope_args(Case& c) {
  const RopeShape s = rope_shape(c);
  return Args{c.act({s.seq, s.micro_batch, s.width()}),
              s.seq,
              s.micro_batch,
              s.kv_heads,
              s.group_size,
              s.head_dim,
              s.seq_offset,
              s.base,
              s.scaling,
              random_document_starts(c, s.seq, s.micro_batch, s.seq_offset)};
}

Row rope_forward_row() {
  return TWIN_ROW(rope_forward, kReordered, [](Case& c) { return rope_args<ops::RopeForward>(c); });
}

Row rope_backward_row() {
  return TWIN_ROW(rope_backward, kReordered,
                  [](Case& c) { return rope_args<ops::RopeBackward>(c); });
}

// The heads of one call of the query and key heads' norms (Note [Query and key norms]): head
// widths under, at and past a warp, heads enough to pass the CUDA weights' 256 chunks.
ops::QkNormHeads qk_norm_heads(Case& c) {
  return {.rows = c.pick({1, 3, 70, 300}),
          .kv_heads = c.pick({1, 2, 3}),
          .group_size = c.pick({1, 2, 4}),
          .head_dim = c.pick({8, 14, 32, 100, 128})};
}

ops::QkNormForward qk_norm_forward_args(Case& c, const ops::QkNormHeads& h) {
  return {.qkv = c.act({h.rows, h.qkv_width()}, -2.f, 2.f),
          .input = c.act({h.count(), h.head_dim}),
          .rstd = c.f32({h.count()}),
          .q_weight = norm_weight(c, h.head_dim),
          .k_weight = norm_weight(c, h.head_dim),
          .heads = h,
          .eps = norm_eps(c)};
}

Row qk_norm_forward_row() {
  return TWIN_ROW(qk_norm_forward, kReordered,
                  [](Case& c) { return qk_norm_forward_args(c, qk_norm_heads(c)); });
}

Row qk_norm_backward_row() {
  return TWIN_ROW(qk_norm_backward, kReordered, [](Case& c) {
    const ops::QkNormForward forward = qk_norm_forward_args(c, qk_norm_heads(c));
    ops::qk_norm_forward(forward);  // the heads and statistics that belong together
    const ops::QkNormHeads& h = forward.heads;
    return ops::QkNormBackward{.dqkv = c.act({h.rows, h.qkv_width()}),
                               .dq_weight = c.f32({h.head_dim}),
                               .dk_weight = c.f32({h.head_dim}),
                               .input = forward.input,
                               .rstd = forward.rstd,
                               .q_weight = forward.q_weight,
                               .k_weight = forward.k_weight,
                               .heads = h};
  });
}

}  // namespace

std::vector<Row> llama_rows() {
  return {rmsnorm_forward_row(), rmsnorm_backward_row(), swiglu_forward_row(),
          swiglu_backward_row(), rope_forward_row(),     rope_backward_row(),
          qk_norm_forward_row(), qk_norm_backward_row()};
}

}  // namespace op_twins
