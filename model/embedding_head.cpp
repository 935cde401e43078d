// Embedding and output head, on the backend of their tensors; the head's logits become their
// own gradient in place (llm.c's fused classifier) to save a (T, B, V) buffer.
#include "model/embedding_head.h"

#include <algorithm>
#include <cmath>

#include "parallel/core/cross_entropy.h"
#include "parallel/core/mappings.h"
#include "runtime/memory_timeline.h"
#include "runtime/ops.h"

namespace model {
namespace {
namespace ops = runtime::ops;
using runtime::DType;
using runtime::MemoryCategory;

// A workspace temporary; `name`: the tensor's in a memory timeline.
Tensor workspace(runtime::Allocator& allocator, const char* name, const runtime::Shape& shape,
                 DType dtype = DType::f32) {
  const runtime::memory_timeline::Name timeline_name(name);
  return Tensor::empty(allocator, shape, dtype, MemoryCategory::workspace);
}

// This rank's vocabulary shard: first row, rows, and how many of them are real tokens.
struct VocabShard {
  int64_t start, rows, real;
};
VocabShard vocab_shard(const GptConfig& config, const LayerDims& d) {
  const int64_t rows = config.padded_vocab(d.tp_size) / d.tp_size, start = d.tp_rank * rows;
  return {start, rows, std::clamp<int64_t>(config.vocab_size - start, 0, rows)};
}
// The head's (vocab shard, C) matrix: the tied word embeddings or the untied output layer.
const Tensor& output_weight(const GptParams& p, const GptConfig& config) {
  return config.untie_embeddings ? p.output_weight : p.wte;
}

// The position starts of a run of the rank's sequence shard (rows counted from the shard's
// first, as d.shard_segments() gives them), or empty (Note [Document positions]).
Tensor shard_starts(const EmbeddingStash& s, const LayerDims& d, const parallel::RowSegment& run) {
  return runtime::optional_rows(s.position_starts, d.shard_first_row() + run.row, run.rows);
}

}  // namespace

StashSpec<EmbeddingStash> embedding_stash_spec(const LayerDims& d) {
  using S = EmbeddingStash;
  const int64_t T = d.seq, Ts = d.seq_shard(), B = d.micro_batch, C = d.hidden;
  StashSpec<EmbeddingStash> spec = {
      {"tokens", &S::tokens, {T, B}, DType::i32, true, /*from_caller=*/true}};
  if (d.hidden_dropout > 0.f) {
    spec.push_back({"dropout_mask", &S::dropout_mask, {Ts, B, C}, DType::u8, true});
  }
  return spec;
}

StashSpec<HeadStash> head_stash_spec(const GptConfig& config, const LayerDims& d, bool keep) {
  using S = HeadStash;
  const DType act = d.activation_dtype;
  const int64_t T = d.seq, Ts = d.seq_shard(), B = d.micro_batch, C = d.hidden;
  const int64_t Vs = vocab_shard(config, d).rows;
  StashSpec<HeadStash> spec = {{"input", &S::input, {Ts, B, C}, act, keep, /*from_caller=*/true}};
  if (d.features.layernorm())
    spec.push_back({"lnf_mean", &S::lnf_mean, {Ts * B}, DType::f32, keep});
  spec.insert(spec.end(),
              {{"lnf_rstd", &S::lnf_rstd, {Ts * B}, DType::f32, keep},
               {"lnf_out", &S::lnf_out, {T, B, C}, act, keep},
               {"logits", &S::logits, {T, B, Vs}, act, keep},
               {"lse", &S::lse, {T * B}, DType::f32, keep},
               {"targets", &S::targets, {T, B}, DType::i32, keep, /*from_caller=*/true}});
  return spec;
}

void embedding_forward(const Tensor& out, EmbeddingStash& s, const Tensor& tokens,
                       const GptParams& p, const GptConfig& config, const LayerDims& d,
                       const LayerGroups& groups, const LayerContext& c,
                       runtime::Allocator& allocator) {
  const int64_t T = d.seq, B = d.micro_batch, C = d.hidden;
  const VocabShard vocab = vocab_shard(config, d);
  // Under sequence parallelism the lookup covers the whole sequence, then each rank keeps its
  // rows summed over the vocabulary shards; otherwise the sum lands in `out` itself.
  const bool scatter = d.sequence_parallel && d.tp_size > 1;
  Tensor words = scatter ? workspace(allocator, "words", {T, B, C}, d.activation_dtype) : out;
  ops::embedding_forward({.out = words,
                          .tokens = tokens,
                          .wte = p.wte,
                          .rows = T * B,
                          .channels = C,
                          .vocab_start = vocab.start,
                          .vocab_rows = vocab.rows});
  if (scatter) {
    parallel::reduce_scatter_to_sp_forward(*groups.tp, out, words);
  } else if (d.tp_size > 1) {
    parallel::reduce_from_tp_forward(*groups.tp, out);
  }
  words = Tensor();
  s.tokens = tokens;
  s.position_starts = c.position_starts;
  StashMaker<EmbeddingStash>(embedding_stash_spec(d), allocator).make_all(s);  // dropout_mask
  const runtime::DropoutKey key = runtime::make_dropout_key(
      c.seed, static_cast<uint64_t>(c.step), static_cast<uint32_t>(config.num_layers),
      runtime::DropoutOp::embedding);
  for (const parallel::RowSegment& run : d.shard_segments()) {  // Note [Context chunks]
    const Tensor rows = out.rows(run.row, run.rows);
    if (!d.features.rope) {  // RoPE: positions enter in each layer's attention instead
      ops::position_embedding_forward({.out = rows,
                                       .wpe = p.wpe,
                                       .seq = run.rows,
                                       .micro_batch = B,
                                       .channels = C,
                                       .seq_offset = run.position,
                                       .document_starts = shard_starts(s, d, run)});
    }
    if (d.hidden_dropout == 0.f) continue;
    ops::dropout_hidden_forward({.out = rows,
                                 .mask = s.dropout_mask.rows(run.row, run.rows),
                                 .input = rows,
                                 .seq = run.rows,
                                 .micro_batch = B,
                                 .channels = C,
                                 .seq_offset = run.position,
                                 .sample_offset = c.sample_offset,
                                 .drop_probability = d.hidden_dropout,
                                 .key = key});
  }
}

void embedding_backward(const GptParams& g, const Tensor& dout, EmbeddingStash& s,
                        const GptConfig& config, const LayerDims& d, const LayerGroups& groups,
                        runtime::Allocator& allocator) {
  const int64_t T = d.seq, B = d.micro_batch, C = d.hidden;
  if (d.hidden_dropout > 0.f) {
    ops::dropout_backward({.dinput = dout,
                           .dout = dout,
                           .mask = s.dropout_mask,
                           .count = dout.numel(),
                           .drop_probability = d.hidden_dropout});
  }
  for (const parallel::RowSegment& run : d.shard_segments()) {
    if (d.features.rope) break;
    ops::position_embedding_backward({.dwpe = g.wpe,
                                      .dout = dout.rows(run.row, run.rows),
                                      .seq = run.rows,
                                      .micro_batch = B,
                                      .channels = C,
                                      .seq_offset = run.position,
                                      .document_starts = shard_starts(s, d, run)});
  }
  Tensor dwords = dout;
  if (d.sequence_parallel && d.tp_size > 1) {
    dwords = workspace(allocator, "dwords", {T, B, C}, d.activation_dtype);
    parallel::reduce_scatter_to_sp_backward(*groups.tp, dwords, dout);
  }
  const VocabShard vocab = vocab_shard(config, d);
  ops::embedding_backward({.dwte = g.wte,
                           .dout = dwords,
                           .tokens = s.tokens,
                           .rows = T * B,
                           .channels = C,
                           .vocab_start = vocab.start,
                           .vocab_rows = vocab.rows});
  s = EmbeddingStash();
}

void head_forward(const Tensor& losses, HeadStash& s, const Tensor& input, const Tensor& targets,
                  const GptParams& p, const GptConfig& config, const LayerDims& d,
                  const LayerGroups& groups, bool keep, runtime::Allocator& allocator) {
  const int64_t rows = d.seq * d.micro_batch, rows_shard = d.seq_shard() * d.micro_batch;
  const int64_t C = d.hidden;
  const VocabShard vocab = vocab_shard(config, d);
  const StashMaker<HeadStash> maker(head_stash_spec(config, d, keep), allocator);
  s.input = input;
  s.targets = targets;
  const bool layernorm = d.features.layernorm();
  if (layernorm) maker.make(s, &HeadStash::lnf_mean);
  maker.make(s, &HeadStash::lnf_rstd);
  maker.make(s, &HeadStash::lnf_out);
  const bool sp = d.sequence_parallel && d.tp_size > 1;
  Tensor normalized = sp ? workspace(allocator, "lnf_out_shard", {d.seq_shard(), d.micro_batch, C},
                                     d.activation_dtype)
                         : s.lnf_out;
  if (layernorm) {
    ops::layernorm_forward({.out = normalized,
                            .mean = s.lnf_mean,
                            .rstd = s.lnf_rstd,
                            .input = input,
                            .weight = p.lnf_weight,
                            .bias = p.lnf_bias,
                            .rows = rows_shard,
                            .channels = C,
                            .eps = d.layernorm_eps});
  } else {
    ops::rmsnorm_forward({.out = normalized,
                          .rstd = s.lnf_rstd,
                          .input = input,
                          .weight = p.lnf_weight,
                          .rows = rows_shard,
                          .channels = C,
                          .eps = d.layernorm_eps});
  }
  if (sp) parallel::gather_from_sp_forward(*groups.tp, s.lnf_out, normalized);
  normalized = Tensor();
  maker.make(s, &HeadStash::logits);
  ops::linear_forward({.out = s.logits,
                       .input = s.lnf_out,
                       .weight = output_weight(p, config),
                       .rows = rows,
                       .in_features = C,
                       .out_features = vocab.rows});
  maker.make(s, &HeadStash::lse);
  if (d.tp_size == 1) {
    ops::cross_entropy_forward({.losses = losses,
                                .lse = s.lse,
                                .logits = s.logits,
                                .targets = targets,
                                .rows = rows,
                                .vocab = config.vocab_size,
                                .padded_vocab = vocab.rows});
  } else {
    // Vocab-parallel cross entropy: the reductions over the group are parallel_core's.
    parallel::vocab_parallel_cross_entropy_forward(
        *groups.tp, {.losses = losses,
                     .lse = s.lse,
                     .row_max = workspace(allocator, "row_max", {rows}),
                     .logits = s.logits,
                     .targets = targets,
                     .rows = rows,
                     .vocab_start = vocab.start,
                     .real_cols = vocab.real,
                     .shard_cols = vocab.rows});
  }
  if (!keep) s = HeadStash();
}

Tensor head_backward(HeadStash& s, const GptParams& p, const GptParams& g, const GptConfig& config,
                     const LayerDims& d, const LayerGroups& groups, float loss_scale,
                     runtime::Allocator& allocator) {
  const int64_t rows = d.seq * d.micro_batch, rows_shard = d.seq_shard() * d.micro_batch;
  const int64_t C = d.hidden;
  const VocabShard vocab = vocab_shard(config, d);
  const Tensor& dlogits = s.logits;  // in place: logits become their gradient
  if (d.tp_size == 1) {
    ops::cross_entropy_backward({.dlogits = dlogits,
                                 .logits = s.logits,
                                 .lse = s.lse,
                                 .targets = s.targets,
                                 .rows = rows,
                                 .vocab = config.vocab_size,
                                 .padded_vocab = vocab.rows,
                                 .scale = loss_scale});
  } else {
    ops::vocab_shard_cross_entropy_backward({.dlogits = dlogits,
                                             .logits = s.logits,
                                             .lse = s.lse,
                                             .targets = s.targets,
                                             .rows = rows,
                                             .vocab_start = vocab.start,
                                             .real_cols = vocab.real,
                                             .shard_cols = vocab.rows,
                                             .scale = loss_scale});
  }
  Tensor dlnf = workspace(allocator, "dlnf", {d.seq, d.micro_batch, C}, d.activation_dtype);
  ops::linear_backward({.dinput = dlnf,
                        .dweight = output_weight(g, config),
                        .dout = dlogits,
                        .input = s.lnf_out,
                        .weight = output_weight(p, config),
                        .rows = rows,
                        .in_features = C,
                        .out_features = vocab.rows});
  if (d.tp_size > 1 && d.sequence_parallel) {
    Tensor shard =
        workspace(allocator, "dlnf_shard", {d.seq_shard(), d.micro_batch, C}, d.activation_dtype);
    parallel::gather_from_sp_backward(*groups.tp, shard, dlnf);
    dlnf = shard;
  } else if (d.tp_size > 1) {
    parallel::copy_to_tp_backward(*groups.tp, dlnf);
  }
  Tensor dinput =
      workspace(allocator, "dinput", {d.seq_shard(), d.micro_batch, C}, d.activation_dtype);
  ops::zero(dinput);
  if (!d.features.layernorm()) {
    ops::rmsnorm_backward({.dinput = dinput,
                           .dweight = g.lnf_weight,
                           .dout = dlnf,
                           .input = s.input,
                           .weight = p.lnf_weight,
                           .rstd = s.lnf_rstd,
                           .rows = rows_shard,
                           .channels = C});
    s = HeadStash();
    return dinput;
  }
  ops::layernorm_backward({.dinput = dinput,
                           .dweight = g.lnf_weight,
                           .dbias = g.lnf_bias,
                           .dout = dlnf,
                           .input = s.input,
                           .weight = p.lnf_weight,
                           .mean = s.lnf_mean,
                           .rstd = s.lnf_rstd,
                           .rows = rows_shard,
                           .channels = C});
  s = HeadStash();
  return dinput;
}

}  // namespace model
