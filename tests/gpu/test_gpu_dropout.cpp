// runtime::cuda::dropout_apply against runtime::cpu: out = inp * mask / (1 - p) from an
// existing mask, exact in f32 and in bf16 (= the rounded CPU result), out of place and in place.
// dropout_apply is no operator of runtime/ops.h, so the op twins do not cover it; every other
// dropout kernel is compared there. Skips without a device.
#include <cstdint>
#include <vector>

#include "runtime/kernels/cpu/dropout.h"
#include "runtime/kernels/cuda/dropout.h"
#include "runtime/kernels/cuda/stream.h"
#include "runtime/philox.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class GpuDropout : public gpu_test::GpuTest {};

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

const runtime::DropoutKey kKey = runtime::make_dropout_key(1234, 7, 2, runtime::DropoutOp::mlp_out);

TEST_F(GpuDropout, ApplyMatchesCpu) {
  runtime::cuda::CudaStream stream;
  const int64_t T = 50, B = 4, C = 25, n = T * B * C;
  const float p = 0.2f;
  std::vector<float> x = gpu_test::random_vector(n, 25);
  std::vector<float> forward_out(static_cast<size_t>(n)), applied(static_cast<size_t>(n));
  std::vector<uint8_t> mask(static_cast<size_t>(n));
  runtime::cpu::dropout_hidden_forward(forward_out.data(), mask.data(), x.data(), T, B, C, 0, 0, p,
                                       kKey);
  runtime::cpu::dropout_apply(applied.data(), x.data(), mask.data(), n, p);
  EXPECT_EQ(applied, forward_out);  // the mask reproduces the forward

  DeviceBuffer<float> x_dev(x), out_dev(static_cast<size_t>(n));
  DeviceBuffer<uint8_t> mask_dev(mask);
  runtime::cuda::dropout_apply(out_dev.data(), x_dev.data(), mask_dev.data(), n, p, stream.get());
  EXPECT_EQ(out_dev.download(), applied);

  // bf16, in place: the rounded CPU result on rounded inputs.
  gpu_test::round_to_bf16_inplace(x);
  runtime::cpu::dropout_apply(applied.data(), x.data(), mask.data(), n, p);
  gpu_test::round_to_bf16_inplace(applied);
  auto x16_dev = gpu_test::upload_bf16(x);
  runtime::cuda::dropout_apply(bf16(x16_dev), bf16(x16_dev), mask_dev.data(), n, p, stream.get());
  EXPECT_EQ(gpu_test::download_bf16(x16_dev), applied);
}

}  // namespace
