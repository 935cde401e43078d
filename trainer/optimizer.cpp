// AdamW and gradient clipping over named views of the flat buffers.
#include "trainer/optimizer.h"

#include "runtime/ops.h"

namespace trainer {

double clip_gradients(const model::GptParams& grads, double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  const double coeff = max_norm / (norm + 1e-6);
  if (coeff >= 1.0) return 1.0;
  runtime::ops::scale_inplace(
      {.x = grads.flat, .count = grads.flat.numel(), .scale = static_cast<float>(coeff)});
  return coeff;
}

AdamW::AdamW(const model::GptParams& params, runtime::Allocator& allocator)
    : exp_avg_(runtime::Tensor::empty(allocator, params.flat.shape(), runtime::DType::f32,
                                      runtime::MemoryCategory::optimizer)),
      exp_avg_sq_(runtime::Tensor::empty(allocator, params.flat.shape(), runtime::DType::f32,
                                         runtime::MemoryCategory::optimizer)) {
  runtime::ops::zero(exp_avg_);
  runtime::ops::zero(exp_avg_sq_);
}

void AdamW::step(const model::GptParams& params, const model::GptParams& grads,
                 const OptimizerConfig& config, double lr, int64_t step,
                 const model::GptParams* compute_copy) {
  runtime::cpu::AdamWParams hyper;
  hyper.lr = static_cast<float>(lr);
  hyper.beta1 = config.adam_beta1;
  hyper.beta2 = config.adam_beta2;
  hyper.eps = config.adam_eps;
  hyper.step = step;
  int64_t offset = 0;  // named tensors tile the flat buffer in order
  for (size_t i = 0; i < params.named.size(); ++i) {
    const model::NamedParam& p = params.named[i];
    const int64_t n = p.tensor.numel();
    hyper.weight_decay = p.weight_decay ? config.weight_decay : 0.f;
    runtime::ops::adamw_step(
        {.param = p.tensor,
         .exp_avg = exp_avg_.view(offset, {n}),
         .exp_avg_sq = exp_avg_sq_.view(offset, {n}),
         .param_copy = compute_copy ? compute_copy->named[i].tensor : runtime::Tensor(),
         .grad = grads.named[i].tensor,
         .count = n,
         .hyper = hyper});
    offset += n;
  }
}

}  // namespace trainer
