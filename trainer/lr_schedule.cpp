// Warmup + decay schedule (see lr_schedule.h).
#include "trainer/lr_schedule.h"

#include <cmath>

namespace trainer {

double learning_rate(const OptimizerConfig& o, int64_t train_steps, int64_t step) {
  const double max_lr = o.lr, min_lr = o.min_lr;
  const int64_t done = step - 1;
  const int64_t warmup = o.lr_warmup_steps;
  const int64_t decay = o.lr_decay_steps > 0 ? o.lr_decay_steps : train_steps;
  if (warmup > 0 && done <= warmup)
    return max_lr * static_cast<double>(done) / static_cast<double>(warmup);
  if (o.lr_decay_style == DecayStyle::constant) return max_lr;
  if (done > decay || decay <= warmup) return min_lr;
  const double ratio = static_cast<double>(done - warmup) / static_cast<double>(decay - warmup);
  const double coeff =
      o.lr_decay_style == DecayStyle::linear ? 1.0 - ratio : 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return min_lr + coeff * (max_lr - min_lr);
}

}  // namespace trainer
