// Embedding and output head on the host backend; the head's logits become their
// own gradient in place (llm.c's fused classifier) to save a (T, B, V) buffer.
#include "model/embedding_head.h"

#include <algorithm>
#include <cmath>

#include "parallel/core/mappings.h"
#include "runtime/ops.h"

namespace model {
namespace {
namespace ops = runtime::ops;
using runtime::DType;
using runtime::MemoryCategory;

Tensor activation(runtime::Allocator& allocator, const runtime::Shape& shape, DType dtype,
                  bool keep) {
  return Tensor::empty(allocator, shape, dtype,
                       keep ? MemoryCategory::activation : MemoryCategory::workspace);
}

Tensor workspace(runtime::Allocator& allocator, const runtime::Shape& shape,
                 DType dtype = DType::f32) {
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
}  // namespace

int64_t embedding_stash_bytes(const LayerDims& d) {
  const int64_t tokens = d.seq * d.micro_batch, shard = d.seq_shard() * d.micro_batch;
  return tokens * 4 + (d.hidden_dropout > 0.f ? shard * d.hidden : 0);
}

int64_t head_stash_bytes(const LayerDims& d, int64_t padded_vocab) {
  const int64_t tokens = d.seq * d.micro_batch, shard = d.seq_shard() * d.micro_batch;
  const int64_t act = runtime::dtype_size(d.activation_dtype);
  return shard * d.hidden * act                      // input
         + tokens * d.hidden * act                   // lnf_out
         + shard * 4 * 2 + tokens * 4                // lnf_mean, lnf_rstd, lse
         + tokens * (padded_vocab / d.tp_size) * act // logits
         + tokens * 4;                               // targets
}

void embedding_forward(const Tensor& out, EmbeddingStash& s, const Tensor& tokens,
                       const GptParams& p, const GptConfig& config, const LayerDims& d,
                       const LayerContext& c, runtime::Allocator& allocator) {
  const int64_t T = d.seq, Ts = d.seq_shard(), B = d.micro_batch, C = d.hidden;
  const VocabShard vocab = vocab_shard(config, d);
  if (d.sequence_parallel && d.tp_size > 1) {
    Tensor words = workspace(allocator, {T, B, C}, d.activation_dtype);
    ops::embedding_forward(words, tokens, p.wte, T * B, C, vocab.start, vocab.rows);
    parallel::reduce_scatter_to_sp_forward(*d.tp, out, words);
  } else {
    ops::embedding_forward(out, tokens, p.wte, T * B, C, vocab.start, vocab.rows);
    if (d.tp_size > 1) parallel::reduce_from_tp_forward(*d.tp, out);
  }
  ops::position_embedding_forward(out, p.wpe, Ts, B, C, d.seq_offset());
  s.tokens = tokens;
  if (d.hidden_dropout > 0.f) {
    s.dropout_mask = Tensor::empty(allocator, {Ts, B, C}, DType::u8, MemoryCategory::activation);
    ops::dropout_hidden_forward(
        out, s.dropout_mask, out, Ts, B, C, d.seq_offset(), c.sample_offset,
        d.hidden_dropout,
        runtime::make_dropout_key(c.seed, static_cast<uint64_t>(c.step),
                                  static_cast<uint32_t>(config.num_layers),
                                  runtime::DropoutOp::embedding));
  }
}

void embedding_backward(const GptParams& g, const Tensor& dout, EmbeddingStash& s,
                        const GptConfig& config, const LayerDims& d,
                        runtime::Allocator& allocator) {
  const int64_t T = d.seq, Ts = d.seq_shard(), B = d.micro_batch, C = d.hidden;
  if (d.hidden_dropout > 0.f) {
    ops::dropout_backward(dout, dout, s.dropout_mask, dout.numel(),
                          d.hidden_dropout);
  }
  ops::position_embedding_backward(g.wpe, dout, Ts, B, C, d.seq_offset());
  Tensor dwords = dout;
  if (d.sequence_parallel && d.tp_size > 1) {
    dwords = workspace(allocator, {T, B, C}, d.activation_dtype);
    parallel::reduce_scatter_to_sp_backward(*d.tp, dwords, dout);
  }
  const VocabShard vocab = vocab_shard(config, d);
  ops::embedding_backward(g.wte, dwords, s.tokens, T * B, C, vocab.start,
                          vocab.rows);
  s = EmbeddingStash();
}

void head_forward(const Tensor& losses, HeadStash& s, const Tensor& input, const Tensor& targets,
                  const GptParams& p, const GptConfig& config, const LayerDims& d, bool keep,
                  runtime::Allocator& allocator) {
  const int64_t rows = d.seq * d.micro_batch, rows_shard = d.seq_shard() * d.micro_batch;
  const int64_t C = d.hidden;
  const VocabShard vocab = vocab_shard(config, d);
  s.input = input;
  s.targets = targets;
  s.lnf_mean = activation(allocator, {rows_shard}, DType::f32, keep);
  s.lnf_rstd = activation(allocator, {rows_shard}, DType::f32, keep);
  s.lnf_out = activation(allocator, {d.seq, d.micro_batch, C}, d.activation_dtype, keep);
  const bool sp = d.sequence_parallel && d.tp_size > 1;
  Tensor normalized =
      sp ? workspace(allocator, {d.seq_shard(), d.micro_batch, C}, d.activation_dtype) : s.lnf_out;
  ops::layernorm_forward(normalized, s.lnf_mean, s.lnf_rstd, input,
                         p.lnf_weight, p.lnf_bias, rows_shard, C, d.layernorm_eps);
  if (sp) parallel::gather_from_sp_forward(*d.tp, s.lnf_out, normalized);
  normalized = Tensor();
  s.logits = activation(allocator, {d.seq, d.micro_batch, vocab.rows}, d.activation_dtype, keep);
  ops::linear_forward(s.logits, s.lnf_out, p.wte, Tensor(), rows, C, vocab.rows);
  s.lse = activation(allocator, {rows}, DType::f32, keep);
  if (d.tp_size == 1) {
    ops::cross_entropy_forward(losses, s.lse, s.logits, targets, rows,
                               config.vocab_size, vocab.rows);
  } else {
    // Vocab-parallel cross entropy: global max, then sum of exp, then the target logit.
    Tensor row_max = workspace(allocator, {rows});
    ops::vocab_shard_max(row_max, s.logits, rows, vocab.real, vocab.rows);
    d.tp->all_reduce_max(row_max);
    ops::vocab_shard_sum_exp(s.lse, s.logits, row_max, rows, vocab.real, vocab.rows);
    d.tp->all_reduce_sum(s.lse);
    ops::vocab_shard_target_logit(losses, s.logits, targets, rows, vocab.start, vocab.real,
                                  vocab.rows);
    d.tp->all_reduce_sum(losses);
    ops::vocab_shard_finish(losses, s.lse, row_max, rows);
  }
  if (!keep) s = HeadStash();
}

Tensor head_backward(HeadStash& s, const GptParams& p, const GptParams& g,
                     const GptConfig& config, const LayerDims& d, float loss_scale,
                     runtime::Allocator& allocator) {
  const int64_t rows = d.seq * d.micro_batch, rows_shard = d.seq_shard() * d.micro_batch;
  const int64_t C = d.hidden;
  const VocabShard vocab = vocab_shard(config, d);
  const Tensor& dlogits = s.logits;  // in place: logits become their gradient
  if (d.tp_size == 1) {
    ops::cross_entropy_backward(dlogits, s.logits, s.lse, s.targets, rows,
                                config.vocab_size, vocab.rows, loss_scale);
  } else {
    ops::vocab_shard_cross_entropy_backward(dlogits, s.logits, s.lse, s.targets,
                                            rows, vocab.start, vocab.real, vocab.rows, loss_scale);
  }
  Tensor dlnf = workspace(allocator, {d.seq, d.micro_batch, C}, d.activation_dtype);
  ops::linear_backward(dlnf, g.wte, Tensor(), dlogits, s.lnf_out, p.wte,
                       rows, C, vocab.rows);
  if (d.tp_size > 1 && d.sequence_parallel) {
    Tensor shard = workspace(allocator, {d.seq_shard(), d.micro_batch, C}, d.activation_dtype);
    parallel::gather_from_sp_backward(*d.tp, shard, dlnf);
    dlnf = shard;
  } else if (d.tp_size > 1) {
    parallel::copy_to_tp_backward(*d.tp, dlnf);
  }
  Tensor dinput = workspace(allocator, {d.seq_shard(), d.micro_batch, C}, d.activation_dtype);
  ops::zero(dinput);
  ops::layernorm_backward(dinput, g.lnf_weight, g.lnf_bias, dlnf,
                          s.input, p.lnf_weight, s.lnf_mean, s.lnf_rstd,
                          rows_shard, C);
  s = HeadStash();
  return dinput;
}

}  // namespace model
