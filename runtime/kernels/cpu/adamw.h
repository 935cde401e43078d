// AdamW with PyTorch semantics (torch.optim.AdamW, amsgrad off): decoupled weight
// decay p *= 1 - lr * wd, then the bias-corrected Adam update. Moments are fp32.
#pragma once

#include <cstdint>

#include "runtime/op_types.h"

namespace runtime::cpu {

using runtime::AdamWParams;

// Updates param, exp_avg (m), exp_avg_sq (v) in place from grad.
void adamw_step(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                const AdamWParams& hyper);

}  // namespace runtime::cpu
