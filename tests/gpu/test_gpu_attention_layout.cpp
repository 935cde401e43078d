// runtime::cuda::merge_heads on more elements than the kernels' largest grid covers at once,
// bit-exact against the CPU twin: the grid-stride loop, at a size the op twins (which compare
// every layout copy at small odd sizes) do not draw. Skips without a device.
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/kernels/cpu/attention.h"
#include "runtime/kernels/cuda/attention_layout.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class AttentionLayoutTest : public gpu_test::GpuTest {};

// Same length and the same bits in every element (no printing of large vectors on failure).
bool identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_F(AttentionLayoutTest, LargeTensorUsesTheGridStrideLoop) {
  // More elements than the kernels' largest grid covers at once (2^16 blocks of 256 threads),
  // so threads go round the grid-stride loop.
  const int64_t t = 130, b = 8, h = 16, d = 1024;  // 17.0M elements
  const size_t n = static_cast<size_t>(t * b * h * d);
  ASSERT_GT(n, size_t{1} << 24);
  std::vector<float> ctx_heads(n);
  for (size_t i = 0; i < n; ++i) ctx_heads[i] = static_cast<float>(i % 16777213);  // exact
  std::vector<float> ctx(n);
  runtime::cpu::merge_heads(ctx.data(), ctx_heads.data(), t, b, h, d);
  DeviceBuffer<float> d_ctx_heads(ctx_heads), d_ctx(n);
  runtime::cuda::merge_heads(d_ctx.data(), d_ctx_heads.data(), t, b, h, d, nullptr);
  EXPECT_TRUE(identical(d_ctx.download(), ctx));
}

}  // namespace
