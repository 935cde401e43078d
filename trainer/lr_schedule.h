// Learning rate with Megatron's OptimizerParamScheduler semantics: linear warmup
// from 0 over lr_warmup_steps, then constant, linear or cosine decay to min_lr at
// lr_decay_steps, min_lr afterwards. Step s (1-based) uses s - 1 completed steps,
// so with warmup the first step's learning rate is 0, as in Megatron.
#pragma once

#include <cstdint>

#include "trainer/config/config.h"

namespace trainer {

double learning_rate(const OptimizerConfig& optimizer, int64_t train_steps, int64_t step);

}  // namespace trainer
