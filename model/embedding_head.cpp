// Embedding and output head on the host backend; the head's logits become their
// own gradient in place (llm.c's fused classifier) to save a (T, B, V) buffer.
#include "model/embedding_head.h"

#include "runtime/kernels/cpu/cross_entropy.h"
#include "runtime/kernels/cpu/dropout.h"
#include "runtime/kernels/cpu/embedding.h"
#include "runtime/kernels/cpu/gemm.h"
#include "runtime/kernels/cpu/layernorm.h"

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
}  // namespace

int64_t embedding_stash_bytes(const LayerDims& d) {
  const int64_t tokens = d.seq * d.micro_batch;
  return tokens * 4 + (d.hidden_dropout > 0.f ? tokens * d.hidden : 0);
}

int64_t head_stash_bytes(const LayerDims& d, int64_t padded_vocab) {
  const int64_t tokens = d.seq * d.micro_batch, act = runtime::dtype_size(d.activation_dtype);
  return tokens * d.hidden * act * 2      // input, lnf_out
         + tokens * 4 * 3                 // lnf_mean, lnf_rstd, lse
         + tokens * padded_vocab * 4      // logits (f32)
         + tokens * 4;                    // targets
}

void embedding_forward(const Tensor& out, EmbeddingStash& s, const Tensor& tokens,
                       const GptParams& p, const GptConfig& config, const LayerDims& d,
                       const LayerContext& c, runtime::Allocator& allocator) {
  const int64_t T = d.seq, B = d.micro_batch, C = d.hidden;
  cpu::embedding_forward(out.f32(), tokens.i32(), p.wte.f32(), T * B, C, 0, config.padded_vocab());
  cpu::position_embedding_forward(out.f32(), p.wpe.f32(), T, B, C, c.seq_offset);
  s.tokens = tokens;
  if (d.hidden_dropout > 0.f) {
    s.dropout_mask = Tensor::empty(allocator, {T, B, C}, DType::u8, MemoryCategory::activation);
    cpu::dropout_hidden_forward(
        out.f32(), s.dropout_mask.u8(), out.f32(), T, B, C, c.seq_offset, c.sample_offset,
        d.hidden_dropout,
        runtime::make_dropout_key(c.seed, static_cast<uint64_t>(c.step),
                                  static_cast<uint32_t>(config.num_layers),
                                  runtime::DropoutOp::embedding));
  }
}

void embedding_backward(const GptParams& g, const Tensor& dout, EmbeddingStash& s,
                        const GptConfig& config, const LayerDims& d) {
  const int64_t T = d.seq, B = d.micro_batch, C = d.hidden;
  if (d.hidden_dropout > 0.f) {
    cpu::dropout_backward(dout.f32(), dout.f32(), s.dropout_mask.u8(), dout.numel(),
                          d.hidden_dropout);
  }
  cpu::embedding_backward(g.wte.f32(), dout.f32(), s.tokens.i32(), T * B, C, 0,
                          config.padded_vocab());
  cpu::position_embedding_backward(g.wpe.f32(), dout.f32(), T, B, C, 0);
  s = EmbeddingStash();
}

void head_forward(float* losses, HeadStash& s, const Tensor& input, const Tensor& targets,
                  const GptParams& p, const GptConfig& config, const LayerDims& d, bool keep,
                  runtime::Allocator& allocator) {
  const int64_t rows = d.seq * d.micro_batch, C = d.hidden, Vp = config.padded_vocab();
  s.input = input;
  s.targets = targets;
  s.lnf_mean = activation(allocator, {rows}, DType::f32, keep);
  s.lnf_rstd = activation(allocator, {rows}, DType::f32, keep);
  s.lnf_out = activation(allocator, {d.seq, d.micro_batch, C}, d.activation_dtype, keep);
  cpu::layernorm_forward(s.lnf_out.f32(), s.lnf_mean.f32(), s.lnf_rstd.f32(), input.f32(),
                         p.lnf_weight.f32(), p.lnf_bias.f32(), rows, C, d.layernorm_eps);
  s.logits = activation(allocator, {d.seq, d.micro_batch, Vp}, DType::f32, keep);
  cpu::linear_forward(s.logits.f32(), s.lnf_out.f32(), p.wte.f32(), nullptr, rows, C, Vp);
  s.lse = activation(allocator, {rows}, DType::f32, keep);
  cpu::cross_entropy_forward(losses, s.lse.f32(), s.logits.f32(), targets.i32(), rows,
                             config.vocab_size, Vp);
  if (!keep) s = HeadStash();
}

Tensor head_backward(HeadStash& s, const GptParams& p, const GptParams& g,
                     const GptConfig& config, const LayerDims& d, float loss_scale,
                     runtime::Allocator& allocator) {
  const int64_t rows = d.seq * d.micro_batch, C = d.hidden, Vp = config.padded_vocab();
  float* dlogits = s.logits.f32();  // in place: logits become their gradient
  cpu::cross_entropy_backward(dlogits, s.logits.f32(), s.lse.f32(), s.targets.i32(), rows,
                              config.vocab_size, Vp, loss_scale);
  Tensor dlnf = Tensor::empty(allocator, {d.seq, d.micro_batch, C}, DType::f32,
                              MemoryCategory::workspace);
  cpu::linear_backward(dlnf.f32(), g.wte.f32(), nullptr, dlogits, s.lnf_out.f32(), p.wte.f32(),
                       rows, C, Vp);
  Tensor dinput = Tensor::zeros(allocator, {d.seq, d.micro_batch, C}, DType::f32,
                                MemoryCategory::workspace);
  cpu::layernorm_backward(dinput.f32(), g.lnf_weight.f32(), g.lnf_bias.f32(), dlnf.f32(),
                          s.input.f32(), p.lnf_weight.f32(), s.lnf_mean.f32(), s.lnf_rstd.f32(),
                          rows, C);
  s = HeadStash();
  return dinput;
}

}  // namespace model
