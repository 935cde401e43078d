// Learning rate with Megatron's OptimizerParamScheduler semantics: linear warmup from 0 over
// lr_warmup_steps, then
// - constant: the peak;
// - linear, cosine: down to min_lr at lr_decay_steps;
// - inverse_square_root: peak * sqrt(max(warmup, 1) / max(n, 1)) after n completed steps,
//   never below min_lr;
// - wsd (warmup-stable-decay): the peak until the last lr_wsd_decay_steps before
//   lr_decay_steps, then down to min_lr in lr_wsd_decay_style's shape (exponential:
//   2 * 0.5^r - 1, linear: 1 - r, cosine, minus_sqrt: 1 - sqrt(r) of the way r through);
// and min_lr after lr_decay_steps (train.steps when 0). Step s (1-based) uses s - 1 completed
// steps, so with warmup the first step's learning rate is 0, as in Megatron.
#pragma once

#include <cstdint>

#include "trainer/config/config.h"

namespace trainer {

double learning_rate(const OptimizerConfig& optimizer, int64_t train_steps, int64_t step);

}  // namespace trainer
