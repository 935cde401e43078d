// runtime::cuda vector ops against runtime::cpu: add, scale_inplace and add_bias
// are single IEEE operations per element, so f32 results and bf16 results (inputs rounded on
// the host) must match exactly; sum_squares to 1e-10 and bit-identical across runs.
#include <cstdint>
#include <vector>

#include "runtime/kernels/cpu/elementwise.h"
#include "runtime/kernels/cpu/vocab_parallel.h"
#include "runtime/kernels/cuda/elementwise.h"
#include "runtime/kernels/cuda/stream.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class GpuElementwise : public gpu_test::GpuTest {};

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

std::vector<float> rounded(std::vector<float> values) {
  gpu_test::round_to_bf16_inplace(values);
  return values;
}

constexpr int64_t kN = 100003;  // not a multiple of any block size

TEST_F(GpuElementwise, F32OpsMatchCpuExactly) {
  runtime::cuda::CudaStream stream;
  const std::vector<float> a = gpu_test::random_vector(kN, 1), b = gpu_test::random_vector(kN, 2);
  DeviceBuffer<float> a_dev(a), b_dev(b), out_dev(kN);

  std::vector<float> expected(kN);
  runtime::cpu::add(expected.data(), a.data(), b.data(), kN);
  runtime::cuda::add(out_dev.data(), a_dev.data(), b_dev.data(), kN, stream.get());
  EXPECT_EQ(out_dev.download(), expected);

  runtime::cpu::scale_inplace(expected.data(), -0.37f, kN);
  runtime::cuda::scale_inplace(out_dev.data(), -0.37f, kN, stream.get());
  EXPECT_EQ(out_dev.download(), expected);

  // add aliasing its first input: a_dev = a_dev + b_dev
  std::vector<float> sum(kN);
  runtime::cpu::add(sum.data(), a.data(), b.data(), kN);
  runtime::cuda::add(a_dev.data(), a_dev.data(), b_dev.data(), kN, stream.get());
  EXPECT_EQ(a_dev.download(), sum);
}

TEST_F(GpuElementwise, AddBiasMatchesCpuExactly) {
  runtime::cuda::CudaStream stream;
  const int64_t rows = 37, cols = 301;
  std::vector<float> out = gpu_test::random_vector(rows * cols, 3);
  const std::vector<float> bias = gpu_test::random_vector(cols, 4);
  DeviceBuffer<float> out_dev(out), bias_dev(bias);
  runtime::cuda::add_bias(out_dev.data(), bias_dev.data(), rows, cols, stream.get());
  runtime::cpu::add_bias(out.data(), bias.data(), rows, cols);
  EXPECT_EQ(out_dev.download(), out);

  // bf16: the device adds in float and rounds once, exactly like rounding the CPU result.
  std::vector<float> out16 = rounded(gpu_test::random_vector(rows * cols, 5));
  const std::vector<float> bias16 = rounded(bias);
  auto out16_dev = gpu_test::upload_bf16(out16);
  auto bias16_dev = gpu_test::upload_bf16(bias16);
  runtime::cuda::add_bias(bf16(out16_dev), bf16(bias16_dev), rows, cols, stream.get());
  runtime::cpu::add_bias(out16.data(), bias16.data(), rows, cols);
  EXPECT_EQ(gpu_test::download_bf16(out16_dev), rounded(out16));
}

TEST_F(GpuElementwise, Bf16OpsRoundTheCpuResult) {
  runtime::cuda::CudaStream stream;
  const std::vector<float> a = rounded(gpu_test::random_vector(kN, 6));
  const std::vector<float> b = rounded(gpu_test::random_vector(kN, 7));
  auto a_dev = gpu_test::upload_bf16(a);
  auto b_dev = gpu_test::upload_bf16(b);
  DeviceBuffer<uint16_t> out_dev(kN);

  std::vector<float> expected(kN);
  runtime::cpu::add(expected.data(), a.data(), b.data(), kN);
  runtime::cuda::add(bf16(out_dev), bf16(a_dev), bf16(b_dev), kN, stream.get());
  EXPECT_EQ(gpu_test::download_bf16(out_dev), rounded(expected));

  std::vector<float> scaled = a;
  runtime::cpu::scale_inplace(scaled.data(), 3.1f, kN);
  runtime::cuda::scale_inplace(bf16(a_dev), 3.1f, kN, stream.get());
  EXPECT_EQ(gpu_test::download_bf16(a_dev), rounded(scaled));
}

TEST_F(GpuElementwise, ConvertRoundsToNearestEven) {
  runtime::cuda::CudaStream stream;
  std::vector<float> values = gpu_test::random_vector(kN, 8, 100.f);
  values[0] = 1.00390625f;  // 1 + 2^-8: a tie, rounds down to the even 1.0
  values[1] = 1.01171875f;  // 1 + 3 * 2^-8: a tie, rounds up to the even 1.015625
  values[2] = -0.f;
  values[3] = 3.4e38f;  // above bf16's largest finite value and the midpoint: +inf
  DeviceBuffer<float> f32_dev(values), back_dev(kN);
  DeviceBuffer<uint16_t> bf16_dev(kN);
  runtime::cuda::convert(bf16(bf16_dev), f32_dev.data(), kN, stream.get());
  EXPECT_EQ(bf16_dev.download(), gpu_test::to_bf16(values));
  runtime::cuda::convert(back_dev.data(), bf16(bf16_dev), kN, stream.get());
  EXPECT_EQ(back_dev.download(), gpu_test::from_bf16(gpu_test::to_bf16(values)));
}

TEST_F(GpuElementwise, SumSquaresMatchesCpuAndIsDeterministic) {
  runtime::cuda::CudaStream stream;
  for (const int64_t n :
       {int64_t{0}, int64_t{1}, int64_t{65536}, int64_t{3 * 65536 + 1234}, int64_t{4000037}}) {
    const std::vector<float> x = gpu_test::random_vector(static_cast<size_t>(n), 9, 2.f);
    DeviceBuffer<float> x_dev(x);
    const double expected = runtime::cpu::sum_squares(x.data(), n);
    const double first = runtime::cuda::sum_squares(x_dev.data(), n, stream.get());
    const double second = runtime::cuda::sum_squares(x_dev.data(), n, stream.get());
    EXPECT_NEAR(first, expected, 1e-10 * expected) << "n = " << n;
    EXPECT_EQ(first, second) << "n = " << n;  // bit-identical across runs

    DeviceBuffer<double> result_dev(1);
    runtime::cuda::sum_squares(result_dev.data(), x_dev.data(), n, stream.get());
    EXPECT_EQ(result_dev.download()[0], first) << "n = " << n;
  }
}

}  // namespace
