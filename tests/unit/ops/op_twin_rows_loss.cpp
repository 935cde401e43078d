// Twin rows of the loss (full and vocab-shard cross entropy), the attention layout and
// products, the vector operators and AdamW: one random case builder each, with its tolerance
// (Note [Twin tolerance]).
#include <algorithm>
#include <vector>

#include "runtime/ops.h"
#include "tests/unit/ops/twin_row.h"

namespace op_twins {
namespace {

namespace ops = runtime::ops;

// Column counts of one vocabulary shard, and its real (non-padding) columns: none, some, all.
struct ShardColumns {
  int64_t shard_cols, real_cols;
};
ShardColumns shard_columns(Case& c) {
  const int64_t shard_cols = c.long_size();
  return {shard_cols, c.pick({0, shard_cols / 2, shard_cols})};
}

// Targets uniform in [0, high), about a quarter of them kIgnoredTarget (data.eod_mask_loss).
Tensor targets(Case& c, int64_t rows, int64_t high) {
  const Tensor t = c.ids({rows}, 0, high);
  for (int64_t r = 0; r < rows; ++r)
    if (c.pick({0, 1, 2, 3}) == 0) t.i32()[r] = runtime::kIgnoredTarget;
  return t;
}

Row cross_entropy_forward_row() {
  return TWIN_ROW(cross_entropy_forward, kReordered, [](Case& c) {
    const int64_t rows = c.size(), vocab = c.long_size();
    const int64_t padded_vocab = vocab + c.pick({0, 3, 7});
    return ops::CrossEntropyForward{.losses = c.f32({rows}),
                                    .lse = c.f32({rows}),
                                    .logits = c.act({rows, padded_vocab}, -4.f, 4.f),
                                    .targets = targets(c, rows, vocab),
                                    .rows = rows,
                                    .vocab = vocab,
                                    .padded_vocab = padded_vocab};
  });
}

Row cross_entropy_backward_row() {
  return TWIN_ROW(cross_entropy_backward, kReordered, [](Case& c) {
    const int64_t rows = c.size(), vocab = c.long_size();
    const int64_t padded_vocab = vocab + c.pick({0, 3, 7});
    ops::CrossEntropyForward forward{.losses = c.f32({rows}),
                                     .lse = c.f32({rows}),
                                     .logits = c.act({rows, padded_vocab}, -4.f, 4.f),
                                     .targets = targets(c, rows, vocab),
                                     .rows = rows,
                                     .vocab = vocab,
                                     .padded_vocab = padded_vocab};
    ops::cross_entropy_forward(forward);  // the lse of these logits
    return ops::CrossEntropyBackward{
        .dlogits = c.coin() ? forward.logits : c.act({rows, padded_vocab}),
        .logits = forward.logits,
        .lse = forward.lse,
        .targets = forward.targets,
        .rows = rows,
        .vocab = vocab,
        .padded_vocab = padded_vocab,
        .scale = c.uniform(.1f, 1.f)};
  });
}

Row vocab_shard_max_row() {
  return TWIN_ROW(vocab_shard_max, kExact, [](Case& c) {
    const int64_t rows = c.size();
    const ShardColumns shard = shard_columns(c);
    return ops::VocabShardMax{.row_max = c.f32({rows}),
                              .logits = c.act({rows, shard.shard_cols}, -4.f, 4.f),
                              .rows = rows,
                              .real_cols = shard.real_cols,
                              .shard_cols = shard.shard_cols};
  });
}

Row vocab_shard_sum_exp_row() {
  return TWIN_ROW(vocab_shard_sum_exp, kHostFloatSum, [](Case& c) {
    const int64_t rows = c.size();
    const ShardColumns shard = shard_columns(c);
    return ops::VocabShardSumExp{
        .row_sum = c.f32({rows}),
        .logits = c.act({rows, shard.shard_cols}, -4.f, 4.f),
        .row_max = c.f32({rows}, 4.f, 5.f),  // the global max, above every logit
        .rows = rows,
        .real_cols = shard.real_cols,
        .shard_cols = shard.shard_cols};
  });
}

Row vocab_shard_target_logit_row() {
  return TWIN_ROW(vocab_shard_target_logit, kExact, [](Case& c) {
    const int64_t rows = c.size(), vocab_start = c.pick({0, 3, 33});
    const ShardColumns shard = shard_columns(c);
    return ops::VocabShardTargetLogit{
        .target_logit = c.f32({rows}),
        .logits = c.act({rows, shard.shard_cols}, -4.f, 4.f),
        .targets = targets(c, rows, vocab_start + shard.shard_cols + 4),
        .rows = rows,
        .vocab_start = vocab_start,
        .real_cols = shard.real_cols,
        .shard_cols = shard.shard_cols};
  });
}

Row vocab_shard_finish_row() {
  return TWIN_ROW(vocab_shard_finish, kF32Math, [](Case& c) {
    const int64_t rows = c.size();
    return ops::VocabShardFinish{.losses = c.f32({rows}),
                                 .lse = c.f32({rows}, 1.f, 100.f),  // sums of exp
                                 .row_max = c.f32({rows}, -4.f, 4.f),
                                 .targets = targets(c, rows, 1000),
                                 .rows = rows};
  });
}

Row vocab_shard_cross_entropy_backward_row() {
  return TWIN_ROW(vocab_shard_cross_entropy_backward, kReordered, [](Case& c) {
    const int64_t rows = c.size(), vocab_start = c.pick({0, 3, 33});
    const ShardColumns shard = shard_columns(c);
    const Tensor logits = c.act({rows, shard.shard_cols}, -4.f, 4.f);
    return ops::VocabShardCrossEntropyBackward{
        .dlogits = c.coin() ? logits : c.act({rows, shard.shard_cols}),
        .logits = logits,
        .lse = c.f32({rows}, 4.f, 6.f),
        .targets = targets(c, rows, vocab_start + shard.shard_cols + 4),
        .rows = rows,
        .vocab_start = vocab_start,
        .real_cols = shard.real_cols,
        .shard_cols = shard.shard_cols,
        .scale = c.uniform(.1f, 1.f)};
  });
}

std::vector<Row> cross_entropy_rows() {
  return {cross_entropy_forward_row(),
          cross_entropy_backward_row(),
          vocab_shard_max_row(),
          vocab_shard_sum_exp_row(),
          vocab_shard_target_logit_row(),
          vocab_shard_finish_row(),
          vocab_shard_cross_entropy_backward_row()};
}

// Query heads per kv head of a grouped-query case (Note [Grouped-query attention]): 1 is
// multi-head attention.
int64_t random_group(Case& c) {
  return c.pick({1, 2, 4});
}

// The sizes of per-head tensors (micro_batch, heads, seq, head_dim): heads query heads,
// heads / group_size kv heads.
struct Heads {
  int64_t seq, micro_batch, heads, head_dim, group_size = 1;
  runtime::Shape per_head() const { return {micro_batch, heads, seq, head_dim}; }
  runtime::Shape per_kv_head() const { return {micro_batch, heads / group_size, seq, head_dim}; }
  runtime::Shape hidden(int64_t per_head_features) const {
    return {seq, micro_batch, heads * per_head_features};
  }
  // The grouped qkv: (seq, micro_batch, kv_heads * (group_size + 2) * head_dim).
  runtime::Shape qkv() const {
    return {seq, micro_batch, heads / group_size * (group_size + 2) * head_dim};
  }
};
Heads random_heads(Case& c) {
  return {c.size(), c.small_size(), c.small_size(), c.pick({1, 3, 7, 33})};
}
Heads random_grouped_heads(Case& c) {
  Heads h = random_heads(c);
  h.group_size = random_group(c);
  h.heads *= h.group_size;
  return h;
}

Row split_qkv_heads_row() {
  return TWIN_ROW(split_qkv_heads, kExact, [](Case& c) {
    const Heads h = random_grouped_heads(c);
    return ops::SplitQkvHeads{.q = c.act(h.per_head()),
                              .k = c.act(h.per_kv_head()),
                              .v = c.act(h.per_kv_head()),
                              .qkv = c.act(h.qkv()),
                              .seq = h.seq,
                              .micro_batch = h.micro_batch,
                              .heads = h.heads,
                              .head_dim = h.head_dim,
                              .group_size = h.group_size};
  });
}

Row merge_qkv_heads_row() {
  return TWIN_ROW(merge_qkv_heads, kExact, [](Case& c) {
    const Heads h = random_grouped_heads(c);
    return ops::MergeQkvHeads{.dqkv = c.act(h.qkv()),
                              .dq = c.act(h.per_head()),
                              .dk = c.act(h.per_kv_head()),
                              .dv = c.act(h.per_kv_head()),
                              .seq = h.seq,
                              .micro_batch = h.micro_batch,
                              .heads = h.heads,
                              .head_dim = h.head_dim,
                              .group_size = h.group_size};
  });
}

Row merge_heads_row() {
  return TWIN_ROW(merge_heads, kExact, [](Case& c) {
    const Heads h = random_heads(c);
    return ops::MergeHeads{.ctx = c.act(h.hidden(h.head_dim)),
                           .ctx_heads = c.act(h.per_head()),
                           .seq = h.seq,
                           .micro_batch = h.micro_batch,
                           .heads = h.heads,
                           .head_dim = h.head_dim};
  });
}

Row split_heads_row() {
  return TWIN_ROW(split_heads, kExact, [](Case& c) {
    const Heads h = random_heads(c);
    return ops::SplitHeads{.ctx_heads = c.act(h.per_head()),
                           .ctx = c.act(h.hidden(h.head_dim)),
                           .seq = h.seq,
                           .micro_batch = h.micro_batch,
                           .heads = h.heads,
                           .head_dim = h.head_dim};
  });
}

std::vector<Row> head_layout_rows() {
  return {split_qkv_heads_row(), merge_qkv_heads_row(), merge_heads_row(), split_heads_row()};
}

// The sizes of the attention products: (batch_heads, seq, seq) and (batch_heads, seq, head_dim)
// of the query heads, (batch_heads / group_size, seq, head_dim) of the kv heads.
struct Products {
  int64_t batch_heads, seq, head_dim, group_size;
  runtime::Shape scores() const { return {batch_heads, seq, seq}; }
  runtime::Shape per_head() const { return {batch_heads, seq, head_dim}; }
  runtime::Shape per_kv_head() const { return {batch_heads / group_size, seq, head_dim}; }
};
Products random_products(Case& c) {
  const int64_t kv_heads = c.pick({1, 3, 7, 21}), group_size = random_group(c);
  return {kv_heads * group_size, c.size(), c.pick({1, 3, 7, 33}), group_size};
}

Row attention_scores_forward_row() {
  return TWIN_ROW(
      attention_scores_forward, kReordered,
      [](Case& c) {
        const Products p = random_products(c);
        return ops::AttentionScoresForward{.scores = c.act(p.scores()),
                                           .q = c.act(p.per_head()),
                                           .k = c.act(p.per_kv_head()),
                                           .batch_heads = p.batch_heads,
                                           .seq = p.seq,
                                           .head_dim = p.head_dim,
                                           .scale = c.uniform(.1f, 1.f),
                                           .group_size = p.group_size};
      },
      &ops::AttentionScoresForward::scores);
}

Row attention_scores_backward_row() {
  return TWIN_ROW(attention_scores_backward, kReordered, [](Case& c) {
    const Products p = random_products(c);
    return ops::AttentionScoresBackward{.dq = c.act(p.per_head()),
                                        .dk = c.act(p.per_kv_head()),
                                        .dscores = c.causal(c.act(p.scores()), p.seq),
                                        .q = c.act(p.per_head()),
                                        .k = c.act(p.per_kv_head()),
                                        .batch_heads = p.batch_heads,
                                        .seq = p.seq,
                                        .head_dim = p.head_dim,
                                        .scale = c.uniform(.1f, 1.f),
                                        .group_size = p.group_size};
  });
}

Row attention_context_forward_row() {
  return TWIN_ROW(attention_context_forward, kReordered, [](Case& c) {
    const Products p = random_products(c);
    return ops::AttentionContextForward{.ctx_heads = c.act(p.per_head()),
                                        .probs = c.causal(c.act(p.scores(), 0.f, 1.f), p.seq),
                                        .v = c.act(p.per_kv_head()),
                                        .batch_heads = p.batch_heads,
                                        .seq = p.seq,
                                        .head_dim = p.head_dim,
                                        .group_size = p.group_size};
  });
}

Row attention_context_backward_row() {
  return TWIN_ROW(
      attention_context_backward, kReordered,
      [](Case& c) {
        const Products p = random_products(c);
        return ops::AttentionContextBackward{.dprobs = c.act(p.scores()),
                                             .dv = c.act(p.per_kv_head()),
                                             .dctx_heads = c.act(p.per_head()),
                                             .probs = c.causal(c.act(p.scores(), 0.f, 1.f), p.seq),
                                             .v = c.act(p.per_kv_head()),
                                             .batch_heads = p.batch_heads,
                                             .seq = p.seq,
                                             .head_dim = p.head_dim,
                                             .group_size = p.group_size};
      },
      &ops::AttentionContextBackward::dprobs);
}

// One random flash-attention case: the fused grouped qkv (seq, micro_batch, kv_heads *
// (group_size + 2) * head_dim) of lengths across the kernels' tiles, 1, 2 or 4 query heads per
// kv head, with or without dropout, at a head and sample offset, with a sliding window (Note
// [Sliding window] in runtime/op_args.h) of none, one key, a few, about half the sequence, or
// more than all of it, with or without documents (random_document_starts).
struct FlashCase {
  runtime::FlashAttentionDims dims;
  Tensor document_starts;  // (seq, micro_batch) i32, or undefined
  runtime::Shape hidden(int64_t per_head) const {
    return {dims.seq_len, dims.micro_batch, dims.heads * per_head};
  }
  runtime::Shape qkv() const {
    const int64_t kv_heads = dims.heads / dims.group_size;
    return {dims.seq_len, dims.micro_batch, kv_heads * (dims.group_size + 2) * dims.head_dim};
  }
  runtime::Shape rows() const { return {dims.micro_batch, dims.heads, dims.seq_len}; }
};
FlashCase random_flash(Case& c) {
  FlashCase f;
  const int64_t group_size = random_group(c);
  f.dims = {.seq_len = c.pick({1, 7, 33, 65, 129}),
            .micro_batch = c.pick({1, 2}),
            .heads = c.pick({1, 3}) * group_size,
            .head_dim = c.pick({1, 8, 33, 64, 128}),
            .head_offset = c.pick({0, 5}),
            .sample_offset = c.pick({0, 3}),
            .scale = c.uniform(.1f, 1.f),
            .dropout_prob = c.coin() ? 0.f : 0.1f,
            .dropout_key = {static_cast<uint32_t>(c.pick({1, 77})), 42u},
            .group_size = group_size};
  f.dims.window = c.pick({0, 1, 5, f.dims.seq_len / 2 + 1, f.dims.seq_len + 3});
  f.document_starts = random_document_starts(c, f.dims.seq_len, f.dims.micro_batch);
  return f;
}

// Flash attention in bf16 rounds P F and dS to bf16 before the products that use them and takes
// Delta from the bf16 ctx, as FlashAttention-2 does, so its error against the fp32 host exceeds
// one GEMM's: on random cases of these rows' shapes it reached 0.95e-2 of the largest value (the
// output's own rounding costs up to 2^-7 of it), all of kReordered's bf16 budget. Twice that
// leaves room for the tensor cores' summation order; f32 stays at kReordered's 1e-5 (Note [Twin
// tolerance]).
constexpr Tolerance kFlashAttention{1e-5, 2e-2};

Row flash_attention_forward_row() {
  return TWIN_ROW(flash_attention_forward, kFlashAttention, [](Case& c) {
    const FlashCase f = random_flash(c);
    return ops::FlashAttentionForward{.ctx = c.act(f.hidden(f.dims.head_dim)),
                                      .lse = c.f32(f.rows()),
                                      .qkv = c.act(f.qkv(), -2.f, 2.f),
                                      .dims = f.dims,
                                      .document_starts = f.document_starts};
  });
}

Row flash_attention_backward_row() {
  return TWIN_ROW(flash_attention_backward, kFlashAttention, [](Case& c) {
    const FlashCase f = random_flash(c);
    ops::FlashAttentionForward forward{.ctx = c.act(f.hidden(f.dims.head_dim)),
                                       .lse = c.f32(f.rows()),
                                       .qkv = c.act(f.qkv(), -2.f, 2.f),
                                       .dims = f.dims,
                                       .document_starts = f.document_starts};
    ops::flash_attention_forward(forward);  // the ctx and lse of this qkv
    c.settle(forward.ctx);
    const Tensor dctx = c.act(f.hidden(f.dims.head_dim));
    zero_lone_key_rows(dctx, f.dims, f.document_starts);  // Note [Lone key in the twins]
    return ops::FlashAttentionBackward{.dqkv = c.act(f.qkv()),
                                       .dctx = dctx,
                                       .qkv = forward.qkv,
                                       .ctx = forward.ctx,
                                       .lse = forward.lse,
                                       .dims = f.dims,
                                       .document_starts = f.document_starts};
  });
}

std::vector<Row> attention_product_rows() {
  return {attention_scores_forward_row(),  attention_scores_backward_row(),
          attention_context_forward_row(), attention_context_backward_row(),
          flash_attention_forward_row(),   flash_attention_backward_row()};
}

Row add_row() {
  return TWIN_ROW(add, kExact, [](Case& c) {
    const int64_t count = c.long_size() * c.small_size();
    const Tensor a = c.act({count});
    return ops::Add{
        .out = c.coin() ? a : c.act({count}), .a = a, .b = c.act({count}), .count = count};
  });
}

Row add_bias_row() {
  return TWIN_ROW(add_bias, kExact, [](Case& c) {
    const int64_t rows = c.size(), cols = c.size();
    return ops::AddBias{.out = c.act({rows, cols}),
                        .bias = c.coin() ? c.act({cols}) : c.misaligned_act({cols}),
                        .rows = rows,
                        .cols = cols};
  });
}

Row scale_inplace_row() {
  return TWIN_ROW(scale_inplace, kExact, [](Case& c) {
    const int64_t count = c.long_size() * c.small_size();
    return ops::ScaleInplace{.x = c.act({count}), .count = count, .scale = c.uniform(-2.f, 2.f)};
  });
}

Row sum_squares_row() {
  return TWIN_ROW(sum_squares, kExact, [](Case& c) {
    const int64_t count = c.pick({1, 33, 4099, 65537, 300007});  // past 2^16: partial sums
    return ops::SumSquares{.x = c.act({count}), .count = count};
  });
}

Row adamw_step_row() {
  return TWIN_ROW(adamw_step, kReordered, [](Case& c) {
    const int64_t count = c.long_size() * c.small_size();
    runtime::AdamWParams hyper;
    hyper.lr = c.uniform(1e-3f, 1e-2f);
    hyper.weight_decay = c.coin() ? 0.1f : 0.f;
    hyper.step = c.pick({1, 2, 10});
    return ops::AdamwStep{.param = c.f32({count}),
                          .exp_avg = c.f32({count}, -.1f, .1f),
                          .exp_avg_sq = c.f32({count}, 0.f, .01f),
                          .param_copy = c.coin() ? c.act({count}) : Tensor(),
                          .grad = c.f32({count}),
                          .count = count,
                          .hyper = hyper};
  });
}

}  // namespace

std::vector<Row> loss_and_attention_rows() {
  std::vector<Row> out = cross_entropy_rows();
  for (auto part : {head_layout_rows, attention_product_rows}) {
    for (Row& row : part()) out.push_back(std::move(row));
  }
  return out;
}

// A weight shard (normal draws, at a row and column offset of the unsharded tensor, with or
// without padded rows) or a filled vector; f32 only, CUDA's double log and cos against the host's.
Row init_param_row() {
  return TWIN_ROW(init_param, kF32Math, [](Case& c) {
    runtime::ParamInit init;
    init.rows = c.size();
    init.cols = c.long_size();
    init.row_offset = c.pick({0, 3, 129});
    init.col_offset = c.pick({0, 7});
    init.global_cols = init.cols + init.col_offset + c.pick({0, 5});
    init.zero_rows_from = c.coin() ? INT64_MAX : init.row_offset + init.rows / 2;
    init.normal = c.pick({0, 1, 1}) == 1;
    init.fill = c.coin() ? 1.f : 0.f;
    init.std_dev = c.uniform(.01f, 1.f);
    init.seed = static_cast<uint64_t>(c.pick({0, 1234, 99991}));
    init.tensor_id = static_cast<uint64_t>(c.pick({1, 0x1e3779b97f4a7c15, 42}));
    return ops::InitParam{.out = c.f32({init.rows, init.cols}), .init = init};
  });
}

std::vector<Row> vector_rows() {
  return {add_row(),         add_bias_row(),   scale_inplace_row(),
          sum_squares_row(), adamw_step_row(), init_param_row()};
}

}  // namespace op_twins
