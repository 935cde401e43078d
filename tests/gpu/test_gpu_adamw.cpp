// runtime::cuda AdamW against runtime::cpu over several steps (weight decay on, bias correction
// from step 1): params and moments within 1e-5 of max |ref| (only FMA contraction may differ);
// the bf16 copy is exactly the rounded fp32 param, and two runs are bit-identical.
#include <cstdint>
#include <vector>

#include "runtime/kernels/cpu/adamw.h"
#include "runtime/kernels/cuda/adamw.h"
#include "runtime/kernels/cuda/stream.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class GpuAdamW : public gpu_test::GpuTest {};

struct State {
  std::vector<float> param, exp_avg, exp_avg_sq;
  std::vector<uint16_t> param_bf16;
};

constexpr int64_t kN = 30011;
constexpr int kSteps = 3;

runtime::cpu::AdamWParams hyper_for(int64_t step) {
  runtime::cpu::AdamWParams hyper;
  hyper.lr = 3e-3f;
  hyper.beta1 = 0.9f;
  hyper.beta2 = 0.95f;
  hyper.eps = 1e-8f;
  hyper.weight_decay = 0.1f;
  hyper.step = step;
  return hyper;
}

std::vector<float> grad_for(int step) {
  return gpu_test::random_vector(kN, 60 + static_cast<uint32_t>(step), 0.5f);
}

State run_gpu() {
  runtime::cuda::CudaStream stream;
  DeviceBuffer<float> param(gpu_test::random_vector(kN, 51)), exp_avg(std::vector<float>(kN, 0.f)),
      exp_avg_sq(std::vector<float>(kN, 0.f));
  DeviceBuffer<uint16_t> param_bf16(kN);
  for (int step = 1; step <= kSteps; ++step) {
    DeviceBuffer<float> grad(grad_for(step));
    if (step == kSteps) {
      runtime::cuda::adamw_step(param.data(), exp_avg.data(), exp_avg_sq.data(),
                                reinterpret_cast<__nv_bfloat16*>(param_bf16.data()), grad.data(),
                                kN, hyper_for(step), stream.get());
    } else {
      runtime::cuda::adamw_step(param.data(), exp_avg.data(), exp_avg_sq.data(), grad.data(), kN,
                                hyper_for(step), stream.get());
    }
  }
  return State{param.download(), exp_avg.download(), exp_avg_sq.download(), param_bf16.download()};
}

TEST_F(GpuAdamW, MatchesCpuOverSteps) {
  State expected{gpu_test::random_vector(kN, 51),
                 std::vector<float>(kN, 0.f),
                 std::vector<float>(kN, 0.f),
                 {}};
  for (int step = 1; step <= kSteps; ++step) {
    const std::vector<float> grad = grad_for(step);
    runtime::cpu::adamw_step(expected.param.data(), expected.exp_avg.data(),
                             expected.exp_avg_sq.data(), grad.data(), kN, hyper_for(step));
  }
  const State actual = run_gpu();
  EXPECT_CLOSE(actual.param, expected.param, 1e-5);
  EXPECT_CLOSE(actual.exp_avg, expected.exp_avg, 1e-5);
  EXPECT_CLOSE(actual.exp_avg_sq, expected.exp_avg_sq, 1e-5);
  EXPECT_EQ(actual.param_bf16, gpu_test::to_bf16(actual.param));

  // The update moved the params (a kernel that did nothing would fail above; this says by how
  // much).
  EXPECT_GT(gpu_test::relative_error(actual.param, gpu_test::random_vector(kN, 51)), 1e-3);
}

TEST_F(GpuAdamW, IsDeterministic) {
  const State first = run_gpu(), second = run_gpu();
  EXPECT_EQ(first.param, second.param);
  EXPECT_EQ(first.exp_avg, second.exp_avg);
  EXPECT_EQ(first.exp_avg_sq, second.exp_avg_sq);
  EXPECT_EQ(first.param_bf16, second.param_bf16);
}

}  // namespace
