// AdamW: the step's scalars come from the host in double rounded to float (as on the CPU);
// each element's update is independent, one element per thread step, with the CPU's
// expression order (p * decay - step_size * (m / denom)) so results differ at most by FMA rounding.
#include <algorithm>
#include <cmath>

#include "runtime/error.h"
#include "runtime/kernels/cuda/adamw.h"
#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/device_common.cuh"

namespace runtime::cuda {
namespace {

using namespace ::runtime::cuda::device;  // device_common.cuh


// Per-step float scalars, computed as in runtime::cpu::adamw_step.
struct AdamWScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  float decay;                  // 1 - lr * weight_decay
  float step_size;              // lr / (1 - beta1^step)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
};

AdamWScalars make_scalars(const AdamWParams& hyper) {
  TRAINER_ASSERT(hyper.step >= 1, "AdamW step " << hyper.step << " must be >= 1");
  const double lr = hyper.lr, beta1 = hyper.beta1, beta2 = hyper.beta2;
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(hyper.step));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(hyper.step));
  AdamWScalars s{};
  s.beta1 = hyper.beta1;
  s.beta2 = hyper.beta2;
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.eps = hyper.eps;
  s.decay = static_cast<float>(1.0 - lr * static_cast<double>(hyper.weight_decay));
  s.step_size = static_cast<float>(lr / bias_correction1);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  return s;
}

// param_bf16 may be null (no bf16 copy).
__global__ void adamw_kernel(float* param, float* exp_avg, float* exp_avg_sq,
                             __nv_bfloat16* param_bf16, const float* grad, int64_t n,
                             AdamWScalars s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grad[i];
    const float m = s.beta1 * exp_avg[i] + s.one_minus_beta1 * g;
    const float v = s.beta2 * exp_avg_sq[i] + s.one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
    const float p = param[i] * s.decay - s.step_size * (m / denom);
    param[i] = p;
    if (param_bf16 != nullptr) param_bf16[i] = __float2bfloat16(p);
  }
}

void launch(float* param, float* exp_avg, float* exp_avg_sq, __nv_bfloat16* param_bf16,
            const float* grad, int64_t n, const AdamWParams& hyper, cudaStream_t stream) {
  const AdamWScalars scalars = make_scalars(hyper);
  TRAINER_ASSERT(n >= 0, "AdamW over " << n << " elements");
  if (n == 0) return;
  adamw_kernel<<<grid_for(n), kThreads, 0, stream>>>(param, exp_avg, exp_avg_sq, param_bf16, grad,
                                                     n, scalars);
  TRAINER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void adamw_step(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                const AdamWParams& hyper, cudaStream_t stream) {
  launch(param, exp_avg, exp_avg_sq, nullptr, grad, n, hyper, stream);
}

void adamw_step(float* param, float* exp_avg, float* exp_avg_sq, __nv_bfloat16* param_bf16,
                const float* grad, int64_t n, const AdamWParams& hyper, cudaStream_t stream) {
  launch(param, exp_avg, exp_avg_sq, param_bf16, grad, n, hyper, stream);
}

}  // namespace runtime::cuda
