// AdamW and gradient clipping over named views of the flat buffers.
#include "trainer/optimizer.h"

#include <cmath>

#include "runtime/kernels/cpu/adamw.h"
#include "runtime/kernels/cpu/elementwise.h"

namespace trainer {

double global_grad_norm(const model::GptParams& grads) {
  return std::sqrt(runtime::cpu::sum_squares(grads.flat.f32(), grads.flat.numel()));
}

double clip_gradients(const model::GptParams& grads, double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  const double coeff = max_norm / (norm + 1e-6);
  if (coeff >= 1.0) return 1.0;
  runtime::cpu::scale_inplace(grads.flat.f32(), static_cast<float>(coeff), grads.flat.numel());
  return coeff;
}

AdamW::AdamW(const model::GptParams& params, runtime::Allocator& allocator)
    : exp_avg_(runtime::Tensor::zeros(allocator, params.flat.shape(), runtime::DType::f32,
                                      runtime::MemoryCategory::optimizer)),
      exp_avg_sq_(runtime::Tensor::zeros(allocator, params.flat.shape(), runtime::DType::f32,
                                         runtime::MemoryCategory::optimizer)) {}

void AdamW::step(const model::GptParams& params, const model::GptParams& grads,
                 const OptimizerConfig& config, double lr, int64_t step) {
  runtime::cpu::AdamWParams hyper;
  hyper.lr = static_cast<float>(lr);
  hyper.beta1 = config.adam_beta1;
  hyper.beta2 = config.adam_beta2;
  hyper.eps = config.adam_eps;
  hyper.step = step;
  float* base = params.flat.f32();
  for (size_t i = 0; i < params.named.size(); ++i) {
    const model::NamedParam& p = params.named[i];
    const int64_t offset = p.tensor.f32() - base;
    hyper.weight_decay = p.weight_decay ? config.weight_decay : 0.f;
    runtime::cpu::adamw_step(p.tensor.f32(), exp_avg_.f32() + offset, exp_avg_sq_.f32() + offset,
                             grads.named[i].tensor.f32(), p.tensor.numel(), hyper);
  }
}

}  // namespace trainer
