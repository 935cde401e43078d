// AdamW over the flat parameter buffer with PyTorch semantics, weight decay only
// on tensors of rank >= 2, and clip_grad_norm_-style global-norm clipping.
// fp32 moments live in the `optimizer` memory category.
#pragma once

#include "model/gpt_params.h"
#include "trainer/config/config.h"

namespace trainer {

// PyTorch clip_grad_norm_: scales by max_norm / (norm + 1e-6) when that is < 1.
// Returns the factor applied (1 when none).
double clip_gradients(const model::GptParams& grads, double norm, double max_norm);

class AdamW {
 public:
  AdamW(const model::GptParams& params, runtime::Allocator& allocator);
  // One update with learning rate `lr`; `step` counts updates from 1. With `compute_copy`
  // (the bf16 weights of a bf16 run; `params` are then the fp32 master weights) the copy is
  // rewritten from the updated params in the same pass.
  void step(const model::GptParams& params, const model::GptParams& grads,
            const OptimizerConfig& config, double lr, int64_t step,
            const model::GptParams* compute_copy = nullptr);

  const runtime::Tensor& exp_avg() const { return exp_avg_; }
  const runtime::Tensor& exp_avg_sq() const { return exp_avg_sq_; }

 private:
  runtime::Tensor exp_avg_;     // flat, like the parameters
  runtime::Tensor exp_avg_sq_;  // flat, like the parameters
};

}  // namespace trainer
