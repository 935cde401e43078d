// Twin rows of the ring attention block operators (Note [Flash blocks]): pack_kv, a flash block
// (diagonal, fully visible, or with queries that see no key; with or without documents), the
// log-sum-exp merge, a block's backward from a merged output, and the assembly of dqkv, with 1,
// 2 or 4 query heads per kv head (Note [Grouped-query attention]); tolerances as Note [Twin
// tolerance].
#include <algorithm>
#include <limits>
#include <vector>

#include "runtime/ops.h"
#include "tests/unit/ops/twin_row.h"

namespace op_twins {
namespace {

namespace ops = runtime::ops;

// As the whole-sequence flash rows: bf16 probabilities and dS before the products.
constexpr Tolerance kFlashBlock{1e-5, 2e-2};
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Query heads per kv head (Note [Grouped-query attention]); 1: multi-head attention.
int64_t random_group(Case& c) {
  return c.pick({1, 2, 4});
}

// The sizes of [s, b, h] tensors of per-head features: heads query heads (ctx, dq, lse),
// heads / group_size kv heads (kv, dkv) and the grouped qkv.
struct HeadSizes {
  int64_t rows, micro_batch, heads, head_dim, group_size = 1;
  runtime::Shape hidden(int64_t per_head) const { return {rows, micro_batch, heads * per_head}; }
  runtime::Shape key_values() const {
    return {rows, micro_batch, heads / group_size * 2 * head_dim};
  }
  runtime::Shape qkv() const {
    return {rows, micro_batch, heads / group_size * (group_size + 2) * head_dim};
  }
  runtime::Shape lse() const { return {micro_batch, heads, rows}; }
};
HeadSizes random_sizes(Case& c) {
  return {c.pick({1, 7, 33, 129}), c.pick({1, 2}), c.pick({1, 3}), c.pick({1, 8, 33, 64, 128})};
}
HeadSizes random_grouped_sizes(Case& c) {
  HeadSizes s = random_sizes(c);
  s.group_size = random_group(c);
  s.heads *= s.group_size;
  return s;
}

// A random block: a diagonal one, or query and key blocks anywhere in the sequence (keys all
// before the queries, overlapping them, or after some: rows that see no key), with a sliding
// window (Note [Sliding window] in runtime/op_args.h) of none, one key, 5, 40 or 100 keys (which
// cut the key block, or end before it: more rows that see no key), or full_len (masks nothing).
// The rows draw its document starts (random_document_starts) anywhere before its last query:
// in the key block, before it (more rows that see no key) or in the query block.
runtime::FlashAttentionDims random_block(Case& c) {
  const int64_t group_size = random_group(c);
  runtime::FlashAttentionDims d{.seq_len = c.pick({1, 7, 33, 65, 129}),
                                .micro_batch = c.pick({1, 2}),
                                .heads = c.pick({1, 3}) * group_size,
                                .head_dim = c.pick({1, 8, 33, 64, 128}),
                                .head_offset = c.pick({0, 5}),
                                .sample_offset = c.pick({0, 3}),
                                .scale = c.uniform(.1f, 1.f),
                                .dropout_prob = c.coin() ? 0.f : 0.1f,
                                .dropout_key = {static_cast<uint32_t>(c.pick({1, 77})), 42u},
                                .group_size = group_size};
  d.q_position = c.pick({0, 40, 200});
  if (c.coin()) {
    d.kv_len = d.seq_len;
    d.kv_position = d.q_position;
  } else {
    d.kv_len = c.pick({1, 7, 33, 65, 129});
    d.kv_position = c.pick({0, 5, 100});
  }
  d.full_len = std::max(d.q_position + d.seq_len, d.kv_position + d.kv_len) + c.pick({0, 3});
  d.window = c.pick({0, 1, 5, 40, 100, d.full_len});
  return d;
}

HeadSizes queries_of(const runtime::FlashAttentionDims& d) {
  return {d.seq_len, d.micro_batch, d.heads, d.head_dim, d.group_size};
}
HeadSizes keys_of(const runtime::FlashAttentionDims& d) {
  return {d.kv_len, d.micro_batch, d.heads, d.head_dim, d.group_size};
}

Row pack_kv_row() {
  return TWIN_ROW(pack_kv, kExact, [](Case& c) {
    const HeadSizes s = random_grouped_sizes(c);
    return ops::PackKv{.kv = c.act(s.key_values()),
                       .qkv = c.act(s.qkv()),
                       .rows = s.rows,
                       .micro_batch = s.micro_batch,
                       .heads = s.heads,
                       .head_dim = s.head_dim,
                       .group_size = s.group_size};
  });
}

// The forward of block `d` on random queries, keys and values, with random documents.
ops::FlashBlockForward random_block_forward(Case& c, const runtime::FlashAttentionDims& d) {
  const HeadSizes q = queries_of(d), k = keys_of(d);
  return ops::FlashBlockForward{
      .ctx = c.f32(q.hidden(d.head_dim)),
      .lse = c.f32(q.lse()),
      .qkv = c.act(q.qkv(), -2.f, 2.f),
      .kv = c.act(k.key_values(), -2.f, 2.f),
      .dims = d,
      .document_starts = random_document_starts(c, d.seq_len, d.micro_batch, d.q_position)};
}

Row flash_block_forward_row() {
  return TWIN_ROW(flash_block_forward, kFlashBlock,
                  [](Case& c) { return random_block_forward(c, random_block(c)); });
}

// Running outputs and blocks with some rows at -inf on either side, or both.
Row flash_merge_row() {
  return TWIN_ROW(flash_merge, kF32Math, [](Case& c) {
    const HeadSizes s = random_sizes(c);
    ops::FlashMerge merge{.ctx = c.f32(s.hidden(s.head_dim)),
                          .lse = c.f32(s.lse(), -5.f, 5.f),
                          .ctx_block = c.f32(s.hidden(s.head_dim)),
                          .lse_block = c.f32(s.lse(), -5.f, 5.f),
                          .rows = s.rows,
                          .micro_batch = s.micro_batch,
                          .heads = s.heads,
                          .head_dim = s.head_dim};
    for (int64_t row = 0; row < merge.lse.numel(); row += 3) {
      const int64_t side = c.pick({0, 1, 2});
      if (side != 1) merge.lse.f32()[row] = kMinusInf;
      if (side != 0) merge.lse_block.f32()[row] = kMinusInf;
    }
    return merge;
  });
}

// The backward of one block with its own output as the merged one (a one-block merge),
// accumulating onto random dq and dkv.
Row flash_block_backward_row() {
  return TWIN_ROW(flash_block_backward, kFlashBlock, [](Case& c) {
    const runtime::FlashAttentionDims d = random_block(c);
    const HeadSizes q = queries_of(d), k = keys_of(d);
    const ops::FlashBlockForward forward = random_block_forward(c, d);
    ops::flash_block_forward(forward);  // the ctx and lse of this block
    const Tensor ctx = c.act(q.hidden(d.head_dim));
    std::copy_n(forward.ctx.f32(), ctx.numel(), ctx.f32());
    c.settle(ctx);
    const Tensor dctx = c.act(q.hidden(d.head_dim));
    zero_lone_key_rows(dctx, d, forward.document_starts);  // Note [Lone key in the twins]
    return ops::FlashBlockBackward{.dq = c.f32(q.hidden(d.head_dim)),
                                   .dkv = c.f32(k.key_values()),
                                   .dctx = dctx,
                                   .qkv = forward.qkv,
                                   .kv = forward.kv,
                                   .ctx = ctx,
                                   .lse = forward.lse,
                                   .dims = d,
                                   .document_starts = forward.document_starts};
  });
}

Row assemble_qkv_grad_row() {
  return TWIN_ROW(assemble_qkv_grad, kExact, [](Case& c) {
    const HeadSizes s = random_grouped_sizes(c);
    return ops::AssembleQkvGrad{.dqkv = c.act(s.qkv()),
                                .dq = c.f32(s.hidden(s.head_dim)),
                                .dkv = c.f32(s.key_values()),
                                .rows = s.rows,
                                .micro_batch = s.micro_batch,
                                .heads = s.heads,
                                .head_dim = s.head_dim,
                                .group_size = s.group_size};
  });
}

}  // namespace

std::vector<Row> flash_block_rows() {
  return {pack_kv_row(), flash_block_forward_row(), flash_merge_row(), flash_block_backward_row(),
          assemble_qkv_grad_row()};
}

}  // namespace op_twins
