// Embedding and output head on the host backend; the head's logits become their
// own gradient in place (llm.c's fused classifier) to save a (T, B, V) buffer.
#include "model/embedding_head.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/cpu/cross_entropy.h"
#include "runtime/kernels/cpu/dropout.h"
#include "runtime/kernels/cpu/embedding.h"
#include "runtime/kernels/cpu/gemm.h"
#include "runtime/kernels/cpu/layernorm.h"
#include "runtime/kernels/cpu/vocab_parallel.h"
#include "parallel/mappings.h"

namespace model {
namespace {
namespace cpu = runtime::cpu;
using runtime::DType;
using runtime::MemoryCategory;

Tensor activation(runtime::Allocator& allocator, const runtime::Shape& shape, DType dtype,
                  bool keep) {
  return Tensor::empty(allocator, shape, dtype,
                       keep ? MemoryCategory::activation : MemoryCategory::workspace);
}

Tensor workspace(runtime::Allocator& allocator, const runtime::Shape& shape) {
  return Tensor::empty(allocator, shape, DType::f32, MemoryCategory::workspace);
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
         + tokens * (padded_vocab / d.tp_size) * 4   // logits (f32)
         + tokens * 4;                               // targets
}

void embedding_forward(const Tensor& out, EmbeddingStash& s, const Tensor& tokens,
                       const GptParams& p, const GptConfig& config, const LayerDims& d,
                       const LayerContext& c, runtime::Allocator& allocator) {
  const int64_t T = d.seq, Ts = d.seq_shard(), B = d.micro_batch, C = d.hidden;
  const VocabShard vocab = vocab_shard(config, d);
  if (d.sequence_parallel && d.tp_size > 1) {
    Tensor words = workspace(allocator, {T, B, C});
    cpu::embedding_forward(words.f32(), tokens.i32(), p.wte.f32(), T * B, C, vocab.start, vocab.rows);
    parallel::reduce_scatter_to_sp_forward(*d.tp, out.f32(), words.f32(), out.numel());
  } else {
    cpu::embedding_forward(out.f32(), tokens.i32(), p.wte.f32(), T * B, C, vocab.start, vocab.rows);
    if (d.tp_size > 1) parallel::reduce_from_tp_forward(*d.tp, out.f32(), out.numel());
  }
  cpu::position_embedding_forward(out.f32(), p.wpe.f32(), Ts, B, C, d.seq_offset());
  s.tokens = tokens;
  if (d.hidden_dropout > 0.f) {
    s.dropout_mask = Tensor::empty(allocator, {Ts, B, C}, DType::u8, MemoryCategory::activation);
    cpu::dropout_hidden_forward(
        out.f32(), s.dropout_mask.u8(), out.f32(), Ts, B, C, d.seq_offset(), c.sample_offset,
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
    cpu::dropout_backward(dout.f32(), dout.f32(), s.dropout_mask.u8(), dout.numel(),
                          d.hidden_dropout);
  }
  cpu::position_embedding_backward(g.wpe.f32(), dout.f32(), Ts, B, C, d.seq_offset());
  Tensor dwords = dout;
  if (d.sequence_parallel && d.tp_size > 1) {
    dwords = workspace(allocator, {T, B, C});
    parallel::reduce_scatter_to_sp_backward(*d.tp, dwords.f32(), dout.f32(), dout.numel());
  }
  const VocabShard vocab = vocab_shard(config, d);
  cpu::embedding_backward(g.wte.f32(), dwords.f32(), s.tokens.i32(), T * B, C, vocab.start,
                          vocab.rows);
  s = EmbeddingStash();
}

void head_forward(float* losses, HeadStash& s, const Tensor& input, const Tensor& targets,
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
  Tensor normalized = sp ? workspace(allocator, {d.seq_shard(), d.micro_batch, C}) : s.lnf_out;
  cpu::layernorm_forward(normalized.f32(), s.lnf_mean.f32(), s.lnf_rstd.f32(), input.f32(),
                         p.lnf_weight.f32(), p.lnf_bias.f32(), rows_shard, C, d.layernorm_eps);
  if (sp) parallel::gather_from_sp_forward(*d.tp, s.lnf_out.f32(), normalized.f32(), normalized.numel());
  normalized = Tensor();
  s.logits = activation(allocator, {d.seq, d.micro_batch, vocab.rows}, DType::f32, keep);
  cpu::linear_forward(s.logits.f32(), s.lnf_out.f32(), p.wte.f32(), nullptr, rows, C, vocab.rows);
  s.lse = activation(allocator, {rows}, DType::f32, keep);
  if (d.tp_size == 1) {
    cpu::cross_entropy_forward(losses, s.lse.f32(), s.logits.f32(), targets.i32(), rows,
                               config.vocab_size, vocab.rows);
  } else {
    // Vocab-parallel cross entropy: global max, then sum of exp, then the target logit.
    float* lse = s.lse.f32();
    Tensor row_max = workspace(allocator, {rows});
    cpu::vocab_shard_max(row_max.f32(), s.logits.f32(), rows, vocab.real, vocab.rows);
    d.tp->all_reduce_max(row_max.f32(), rows);
    cpu::vocab_shard_sum_exp(lse, s.logits.f32(), row_max.f32(), rows, vocab.real, vocab.rows);
    d.tp->all_reduce_sum(lse, rows);
    cpu::vocab_shard_target_logit(losses, s.logits.f32(), targets.i32(), rows, vocab.start,
                                  vocab.real, vocab.rows);
    d.tp->all_reduce_sum(losses, rows);
    for (int64_t r = 0; r < rows; ++r) {
      lse[r] = row_max.f32()[r] + std::log(lse[r]);
      losses[r] = lse[r] - losses[r];
    }
  }
  if (!keep) s = HeadStash();
}

Tensor head_backward(HeadStash& s, const GptParams& p, const GptParams& g,
                     const GptConfig& config, const LayerDims& d, float loss_scale,
                     runtime::Allocator& allocator) {
  const int64_t rows = d.seq * d.micro_batch, rows_shard = d.seq_shard() * d.micro_batch;
  const int64_t C = d.hidden;
  const VocabShard vocab = vocab_shard(config, d);
  float* dlogits = s.logits.f32();  // in place: logits become their gradient
  if (d.tp_size == 1) {
    cpu::cross_entropy_backward(dlogits, s.logits.f32(), s.lse.f32(), s.targets.i32(), rows,
                                config.vocab_size, vocab.rows, loss_scale);
  } else {
    cpu::vocab_shard_cross_entropy_backward(dlogits, s.logits.f32(), s.lse.f32(), s.targets.i32(),
                                            rows, vocab.start, vocab.real, vocab.rows, loss_scale);
  }
  Tensor dlnf = workspace(allocator, {d.seq, d.micro_batch, C});
  cpu::linear_backward(dlnf.f32(), g.wte.f32(), nullptr, dlogits, s.lnf_out.f32(), p.wte.f32(),
                       rows, C, vocab.rows);
  if (d.tp_size > 1 && d.sequence_parallel) {
    Tensor shard = workspace(allocator, {d.seq_shard(), d.micro_batch, C});
    parallel::gather_from_sp_backward(*d.tp, shard.f32(), dlnf.f32(), shard.numel());
    dlnf = shard;
  } else if (d.tp_size > 1) {
    parallel::copy_to_tp_backward(*d.tp, dlnf.f32(), dlnf.numel());
  }
  Tensor dinput = Tensor::zeros(allocator, {d.seq_shard(), d.micro_batch, C}, DType::f32,
                                MemoryCategory::workspace);
  cpu::layernorm_backward(dinput.f32(), g.lnf_weight.f32(), g.lnf_bias.f32(), dlnf.f32(),
                          s.input.f32(), p.lnf_weight.f32(), s.lnf_mean.f32(), s.lnf_rstd.f32(),
                          rows_shard, C);
  s = HeadStash();
  return dinput;
}

}  // namespace model
