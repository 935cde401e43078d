// runtime::cuda GELU (tanh and erf forms) against runtime::cpu: f32 within 1e-5 of max |ref|,
// bf16 (inputs rounded on the host) within 1e-2; in-place calls equal out-of-place ones and
// two runs are bit-identical.
#include <cstdint>
#include <vector>

#include "runtime/kernels/cpu/gelu.h"
#include "runtime/kernels/cuda/gelu.h"
#include "runtime/kernels/cuda/stream.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;
using runtime::cpu::GeluKind;

class GpuGelu : public gpu_test::GpuTest, public ::testing::WithParamInterface<GeluKind> {};

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

constexpr int64_t kN = 70001;

TEST_P(GpuGelu, F32MatchesCpu) {
  const GeluKind kind = GetParam();
  runtime::cuda::CudaStream stream;
  const std::vector<float> x = gpu_test::random_vector(kN, 11, 5.f);
  const std::vector<float> dout = gpu_test::random_vector(kN, 12);
  std::vector<float> y(kN), dx(kN);
  runtime::cpu::gelu_forward(y.data(), x.data(), kN, kind);
  runtime::cpu::gelu_backward(dx.data(), dout.data(), x.data(), kN, kind);

  DeviceBuffer<float> x_dev(x), dout_dev(dout), y_dev(kN), dx_dev(kN);
  runtime::cuda::gelu_forward(y_dev.data(), x_dev.data(), kN, kind, stream.get());
  runtime::cuda::gelu_backward(dx_dev.data(), dout_dev.data(), x_dev.data(), kN, kind,
                               stream.get());
  const std::vector<float> y_gpu = y_dev.download(), dx_gpu = dx_dev.download();
  EXPECT_CLOSE(y_gpu, y, 1e-5);
  EXPECT_CLOSE(dx_gpu, dx, 1e-5);

  // Repeat, then in place (out = inp, dinp = dout): bit-identical to the first run.
  runtime::cuda::gelu_forward(y_dev.data(), x_dev.data(), kN, kind, stream.get());
  EXPECT_EQ(y_dev.download(), y_gpu);
  runtime::cuda::gelu_backward(dout_dev.data(), dout_dev.data(), x_dev.data(), kN, kind,
                               stream.get());
  EXPECT_EQ(dout_dev.download(), dx_gpu);
  runtime::cuda::gelu_forward(x_dev.data(), x_dev.data(), kN, kind, stream.get());
  EXPECT_EQ(x_dev.download(), y_gpu);
}

TEST_P(GpuGelu, Bf16MatchesCpuOnRoundedInputs) {
  const GeluKind kind = GetParam();
  runtime::cuda::CudaStream stream;
  std::vector<float> x = gpu_test::random_vector(kN, 13, 5.f);
  std::vector<float> dout = gpu_test::random_vector(kN, 14);
  gpu_test::round_to_bf16_inplace(x);
  gpu_test::round_to_bf16_inplace(dout);
  std::vector<float> y(kN), dx(kN);
  runtime::cpu::gelu_forward(y.data(), x.data(), kN, kind);
  runtime::cpu::gelu_backward(dx.data(), dout.data(), x.data(), kN, kind);

  auto x_dev = gpu_test::upload_bf16(x);
  auto dout_dev = gpu_test::upload_bf16(dout);
  DeviceBuffer<uint16_t> y_dev(kN), dx_dev(kN);
  runtime::cuda::gelu_forward(bf16(y_dev), bf16(x_dev), kN, kind, stream.get());
  runtime::cuda::gelu_backward(bf16(dx_dev), bf16(dout_dev), bf16(x_dev), kN, kind, stream.get());
  EXPECT_CLOSE(gpu_test::download_bf16(y_dev), y, 1e-2);
  EXPECT_CLOSE(gpu_test::download_bf16(dx_dev), dx, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Kinds, GpuGelu, ::testing::Values(GeluKind::tanh, GeluKind::erf),
                         [](const ::testing::TestParamInfo<GeluKind>& param_info) {
                           return param_info.param == GeluKind::tanh ? "tanh" : "erf";
                         });

}  // namespace
