// AdamW with PyTorch semantics (torch.optim.AdamW, amsgrad off): decoupled weight
// decay p *= 1 - lr * wd, then the bias-corrected Adam update. Moments are fp32.
#pragma once

#include <cstdint>

namespace runtime::cpu {

struct AdamWParams {
  float lr = 0.f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.f;
  int64_t step = 1;  // 1-based count of updates including this one (bias correction)
};

// Updates param, exp_avg (m), exp_avg_sq (v) in place from grad.
void adamw_step(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                const AdamWParams& hyper);

}  // namespace runtime::cpu
