// runtime::cuda::rmsnorm in bf16 against Note [RMSNorm rounding], bit for bit: out is the weight
// times x * rstd rounded to bf16 (Hugging Face's `weight * hidden.to(bf16)`), and dweight sums
// dout times that rounded product; the f32 backward with its own scratch against the caller's.
// The op twins compare with the f32 host within a tolerance, which cannot tell the rounding
// apart. Skips without a device.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/kernels/cuda/rmsnorm.h"
#include "runtime/kernels/cuda/stream.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;
using gpu_test::round_to_bf16;

class GpuRmsnorm : public gpu_test::GpuTest {};

constexpr float kEps = 1e-6f;

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

// bf16 inputs of (rows, C), as floats holding bf16 values.
std::vector<float> bf16_values(size_t n, uint32_t seed, float scale) {
  std::vector<float> values = gpu_test::random_vector(n, seed, scale);
  gpu_test::round_to_bf16_inplace(values);
  return values;
}

TEST_F(GpuRmsnorm, Bf16RoundsTheNormalizedProductBeforeTheWeight) {
  for (const int64_t C : {129, 256}) {  // the element-wise and the packed kernel
    SCOPED_TRACE(testing::Message() << C << " channels");
    const int64_t rows = 33;
    const std::vector<float> x = bf16_values(rows * C, 41, 2.f), w = bf16_values(C, 42, 1.5f);
    runtime::cuda::CudaStream stream;
    DeviceBuffer<uint16_t> x_device = gpu_test::upload_bf16(x), w_device = gpu_test::upload_bf16(w);
    DeviceBuffer<uint16_t> out(rows * C);
    DeviceBuffer<float> rstd(rows);
    runtime::cuda::rmsnorm_forward(bf16(out), rstd.data(), bf16(x_device), bf16(w_device), rows, C,
                                   kEps, stream.get());
    const std::vector<float> got = gpu_test::download_bf16(out), s = rstd.download();
    int64_t mismatches = 0, unrounded_differs = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double square_sum = 0;
      for (int64_t c = 0; c < C; ++c) square_sum += double{x[r * C + c]} * x[r * C + c];
      EXPECT_NEAR(s[r], 1.0 / std::sqrt(square_sum / C + kEps), 1e-6 * s[r]) << "row " << r;
      for (int64_t c = 0; c < C; ++c) {
        const float value = x[r * C + c],
                    rounded = round_to_bf16(w[c] * round_to_bf16(value * s[r]));
        mismatches += got[r * C + c] != rounded;
        unrounded_differs += rounded != round_to_bf16(w[c] * (value * s[r]));
      }
    }
    EXPECT_EQ(mismatches, 0);
    EXPECT_GT(unrounded_differs, 0);  // the rounding shows at this size
  }
}

TEST_F(GpuRmsnorm, Bf16WeightGradientSumsDoutTimesTheRoundedProduct) {
  const int64_t rows = 1000, C = 129;  // 250 row chunks of 4 rows
  const std::vector<float> x = bf16_values(rows * C, 43, 2.f), w = bf16_values(C, 44, 1.5f);
  const std::vector<float> dout = bf16_values(rows * C, 45, 1.f);
  runtime::cuda::CudaStream stream;
  DeviceBuffer<uint16_t> x_device = gpu_test::upload_bf16(x), w_device = gpu_test::upload_bf16(w);
  DeviceBuffer<uint16_t> dout_device = gpu_test::upload_bf16(dout), out(rows * C),
                         dinp(std::vector<uint16_t>(rows * C, 0));
  DeviceBuffer<float> rstd(rows), dweight(std::vector<float>(C, 0.f));
  runtime::cuda::rmsnorm_forward(bf16(out), rstd.data(), bf16(x_device), bf16(w_device), rows, C,
                                 kEps, stream.get());
  runtime::cuda::rmsnorm_backward(bf16(dinp), dweight.data(), bf16(dout_device), bf16(x_device),
                                  bf16(w_device), rstd.data(), rows, C, nullptr, stream.get());
  const std::vector<float> got = dweight.download(), s = rstd.download();
  double largest_gap = 0;  // between the sums of the rounded and of the unrounded products
  for (int64_t c = 0; c < C; ++c) {
    double rounded = 0, unrounded = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float value = x[r * C + c];
      rounded += double{dout[r * C + c] * round_to_bf16(value * s[r])};
      unrounded += double{dout[r * C + c] * (value * s[r])};
    }
    EXPECT_NEAR(got[c], rounded, 1e-6 * std::max(1.0, std::fabs(rounded))) << "channel " << c;
    largest_gap = std::max(largest_gap, std::fabs(rounded - unrounded));
  }
  EXPECT_GT(largest_gap, 1e-4);  // the tolerance above tells the two apart
}

TEST_F(GpuRmsnorm, OwnScratchAndCallerScratchGiveTheSameBits) {
  const int64_t rows = 1000, C = 384;
  const std::vector<float> x = gpu_test::random_vector(rows * C, 46, 2.f);
  const std::vector<float> w = gpu_test::random_vector(C, 47),
                           dout = gpu_test::random_vector(rows * C, 48);
  auto run = [&](bool caller_scratch) {
    runtime::cuda::CudaStream stream;
    DeviceBuffer<float> x_device(x), w_device(w), dout_device(dout), out(rows * C), rstd(rows),
        dinp(gpu_test::random_vector(rows * C, 49)), dweight(gpu_test::random_vector(C, 50));
    DeviceBuffer<double> scratch(
        caller_scratch ? runtime::cuda::rmsnorm_backward_scratch_bytes(rows, C) / 8 : 0);
    runtime::cuda::rmsnorm_forward(out.data(), rstd.data(), x_device.data(), w_device.data(), rows,
                                   C, kEps, stream.get());
    runtime::cuda::rmsnorm_backward(dinp.data(), dweight.data(), dout_device.data(),
                                    x_device.data(), w_device.data(), rstd.data(), rows, C,
                                    scratch.data(), stream.get());
    std::vector<float> all = out.download();
    for (const auto& part : {rstd.download(), dinp.download(), dweight.download()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  };
  EXPECT_EQ(run(false), run(true));
}

}  // namespace
