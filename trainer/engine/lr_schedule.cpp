// Warmup + decay schedule (see lr_schedule.h).
#include "trainer/engine/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace trainer {
namespace {

// The coefficient of (max_lr - min_lr) at `ratio` of a decay of this shape, in [0, 1]: a WSD
// schedule's final decay, and (linear, cosine) the linear and cosine schedules' whole decay.
double decay_coefficient(WsdDecayStyle style, double ratio) {
  switch (style) {
    case WsdDecayStyle::linear:
      return 1.0 - ratio;
    case WsdDecayStyle::cosine:
      return 0.5 * (std::cos(M_PI * ratio) + 1.0);
    case WsdDecayStyle::exponential:
      return 2.0 * std::pow(0.5, ratio) - 1.0;
    case WsdDecayStyle::minus_sqrt:
      return 1.0 - std::sqrt(ratio);
  }
  return 0.0;
}

}  // namespace

double learning_rate(const OptimizerConfig& o, int64_t train_steps, int64_t step) {
  const double max_lr = o.lr, min_lr = o.min_lr;
  const int64_t done = step - 1;
  const int64_t warmup = o.lr_warmup_steps;
  const int64_t decay = o.lr_decay_steps > 0 ? o.lr_decay_steps : train_steps;
  if (warmup > 0 && done <= warmup)
    return max_lr * static_cast<double>(done) / static_cast<double>(warmup);
  if (o.lr_decay_style == DecayStyle::constant) return max_lr;
  if (done > decay || decay <= warmup) return min_lr;
  if (o.lr_decay_style == DecayStyle::inverse_square_root) {
    const double from_peak = std::sqrt(static_cast<double>(std::max<int64_t>(warmup, 1)) /
                                       static_cast<double>(std::max<int64_t>(done, 1)));
    return std::max(min_lr, max_lr * from_peak);
  }
  if (o.lr_decay_style == DecayStyle::wsd) {
    const int64_t anneal_start = decay - o.lr_wsd_decay_steps;
    if (done <= anneal_start) return max_lr;
    const double ratio =
        static_cast<double>(done - anneal_start) / static_cast<double>(o.lr_wsd_decay_steps);
    return min_lr + decay_coefficient(o.lr_wsd_decay_style, ratio) * (max_lr - min_lr);
  }
  const double ratio = static_cast<double>(done - warmup) / static_cast<double>(decay - warmup);
  const WsdDecayStyle shape =
      o.lr_decay_style == DecayStyle::linear ? WsdDecayStyle::linear : WsdDecayStyle::cosine;
  return min_lr + decay_coefficient(shape, ratio) * (max_lr - min_lr);
}

}  // namespace trainer
