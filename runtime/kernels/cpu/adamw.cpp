// AdamW with torch.optim.AdamW semantics (amsgrad off): decoupled weight decay, then the
// bias-corrected Adam update, all in place. The step's scalars are computed once in double
// and rounded to float; each element's update is independent (any thread split gives the same).
#include "runtime/kernels/cpu/adamw.h"

#include <cmath>

#include "runtime/error.h"
#include "runtime/kernels/cpu/vector_math.h"

namespace runtime::cpu {

void adamw_step(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                const AdamWParams& hyper) {
  TRAINER_ASSERT(hyper.step >= 1, "AdamW step " << hyper.step << " must be >= 1");
  const double lr = hyper.lr, beta1 = hyper.beta1, beta2 = hyper.beta2;
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(hyper.step));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(hyper.step));
  const float decay = static_cast<float>(1.0 - lr * static_cast<double>(hyper.weight_decay));
  const float step_size = static_cast<float>(lr / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float b1 = hyper.beta1, b2 = hyper.beta2, eps = hyper.eps;
  const float one_minus_b1 = static_cast<float>(1.0 - beta1);
  const float one_minus_b2 = static_cast<float>(1.0 - beta2);
#pragma omp parallel for simd schedule(static) if (n >= detail::kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float m = b1 * exp_avg[i] + one_minus_b1 * g;
    const float v = b2 * exp_avg_sq[i] + one_minus_b2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = std::sqrt(v) / bias_correction2_sqrt + eps;
    param[i] = param[i] * decay - step_size * (m / denom);  // addcdiv_(m, denom, -step_size)
  }
}

}  // namespace runtime::cpu
