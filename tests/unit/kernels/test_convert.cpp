// f32 <-> bf16 on the host: round to nearest even (ties to the even bf16), NaN stays NaN,
// infinities and signed zero survive, bf16 -> f32 is exact; and ops::convert /
// ops::adamw_step's param_copy on host tensors use exactly these conversions.
#include "runtime/kernels/cpu/convert.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernel_test_util.h"
#include "runtime/allocator.h"
#include "runtime/ops.h"

namespace {

using namespace runtime::cpu;

float from_bits(uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

TEST(Convert, RoundsToNearestEvenAndKeepsSpecialValues) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the tie goes to the even mantissa (1).
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808000u)), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
  EXPECT_EQ(float_to_bf16(from_bits(0x3f818000u)), 0x3f82);
  // Just above a tie rounds up, just below rounds down.
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16(from_bits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits in the low half only must not round to infinity.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7f800001u)))));
  // The largest finite float rounds up to infinity, as on the device.
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
}

TEST(Convert, Bf16ToF32IsExactAndRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const float f = bf16_to_float(b);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), b) << "bits " << bits;
  }
}

TEST(Convert, OpsConvertAndAdamwCopyUseTheScalarRule) {
  runtime::CpuAllocator allocator;
  const int64_t n = 1000;
  const auto values = kernel_test::random_vector(n, 7);
  auto f32 = runtime::Tensor::empty(allocator, {n}, runtime::DType::f32,
                                    runtime::MemoryCategory::workspace);
  auto bf16 = runtime::Tensor::empty(allocator, {n}, runtime::DType::bf16,
                                     runtime::MemoryCategory::workspace);
  auto back = runtime::Tensor::empty(allocator, {n}, runtime::DType::f32,
                                     runtime::MemoryCategory::workspace);
  std::copy(values.begin(), values.end(), f32.f32());
  runtime::ops::convert(bf16, f32);
  runtime::ops::convert(back, bf16);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(bf16.data<uint16_t>()[i], float_to_bf16(values[static_cast<size_t>(i)]));
    ASSERT_EQ(back.f32()[i], bf16_to_float(bf16.data<uint16_t>()[i]));
  }
  // AdamW with a bf16 copy: the master weights move, the copy is their rounding.
  auto m = runtime::Tensor::empty(allocator, {n}, runtime::DType::f32,
                                  runtime::MemoryCategory::workspace);
  auto v = runtime::Tensor::empty(allocator, {n}, runtime::DType::f32,
                                  runtime::MemoryCategory::workspace);
  m.zero_();
  v.zero_();
  runtime::AdamWParams hyper;
  hyper.lr = 1e-2f;
  runtime::ops::adamw_step({.param = f32,
                            .exp_avg = m,
                            .exp_avg_sq = v,
                            .param_copy = bf16,
                            .grad = back,
                            .count = n,
                            .hyper = hyper});
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NE(f32.f32()[i], values[static_cast<size_t>(i)]);
    ASSERT_EQ(bf16.data<uint16_t>()[i], float_to_bf16(f32.f32()[i]));
  }
}

TEST(Convert, OpsConvertRejectsMismatchedCounts) {
  runtime::CpuAllocator allocator;
  auto a = runtime::Tensor::empty(allocator, {4}, runtime::DType::f32,
                                  runtime::MemoryCategory::workspace);
  auto b = runtime::Tensor::empty(allocator, {5}, runtime::DType::bf16,
                                  runtime::MemoryCategory::workspace);
  EXPECT_THROW(runtime::ops::convert(b, a), std::logic_error);
}

}  // namespace
