// GPU head split/merge copies against the CPU twins: bit-exact in f32 and bf16 (pure copies),
// every output element written, and split/merge are each other's inverse. Skips without a device.
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/kernels/cpu/attention.h"
#include "runtime/kernels/cuda/attention_layout.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class AttentionLayoutTest : public gpu_test::GpuTest {};

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

// Same length and the same bits in every element (no printing of large vectors on failure).
bool identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Odd sizes, so a transposed index or a wrong stride lands on a different element.
constexpr int64_t T = 5, B = 3, H = 4, D = 7;
constexpr size_t kHeadElements = static_cast<size_t>(B * H * T * D);

TEST_F(AttentionLayoutTest, SplitAndMergeQkvF32MatchCpu) {
  const std::vector<float> qkv = gpu_test::random_vector(3 * kHeadElements, 21);
  std::vector<float> q(kHeadElements), k(kHeadElements), v(kHeadElements);
  runtime::cpu::split_qkv_heads(q.data(), k.data(), v.data(), qkv.data(), T, B, H, D);

  DeviceBuffer<float> d_qkv(qkv);
  DeviceBuffer<float> d_q(std::vector<float>(kHeadElements, 9.f));
  DeviceBuffer<float> d_k(std::vector<float>(kHeadElements, 9.f));
  DeviceBuffer<float> d_v(std::vector<float>(kHeadElements, 9.f));
  runtime::cuda::split_qkv_heads(d_q.data(), d_k.data(), d_v.data(), d_qkv.data(), T, B, H, D,
                                 nullptr);
  EXPECT_TRUE(identical(d_q.download(), q));
  EXPECT_TRUE(identical(d_k.download(), k));
  EXPECT_TRUE(identical(d_v.download(), v));

  // Merge other gradients back, against the CPU; split then merge is the identity.
  const std::vector<float> dq = gpu_test::random_vector(kHeadElements, 22);
  const std::vector<float> dk = gpu_test::random_vector(kHeadElements, 23);
  const std::vector<float> dv = gpu_test::random_vector(kHeadElements, 24);
  std::vector<float> dqkv(3 * kHeadElements);
  runtime::cpu::merge_qkv_heads(dqkv.data(), dq.data(), dk.data(), dv.data(), T, B, H, D);
  DeviceBuffer<float> d_dq(dq), d_dk(dk), d_dv(dv);
  DeviceBuffer<float> d_dqkv(std::vector<float>(3 * kHeadElements, 9.f));
  runtime::cuda::merge_qkv_heads(d_dqkv.data(), d_dq.data(), d_dk.data(), d_dv.data(), T, B, H, D,
                                 nullptr);
  EXPECT_TRUE(identical(d_dqkv.download(), dqkv));
  runtime::cuda::merge_qkv_heads(d_dqkv.data(), d_q.data(), d_k.data(), d_v.data(), T, B, H, D,
                                 nullptr);
  EXPECT_TRUE(identical(d_dqkv.download(), qkv));
}

TEST_F(AttentionLayoutTest, MergeAndSplitHeadsF32MatchCpu) {
  const std::vector<float> ctx_heads = gpu_test::random_vector(kHeadElements, 25);
  std::vector<float> ctx(kHeadElements);
  runtime::cpu::merge_heads(ctx.data(), ctx_heads.data(), T, B, H, D);

  DeviceBuffer<float> d_ctx_heads(ctx_heads);
  DeviceBuffer<float> d_ctx(std::vector<float>(kHeadElements, 9.f));
  runtime::cuda::merge_heads(d_ctx.data(), d_ctx_heads.data(), T, B, H, D, nullptr);
  EXPECT_TRUE(identical(d_ctx.download(), ctx));

  const std::vector<float> dctx = gpu_test::random_vector(kHeadElements, 26);
  std::vector<float> dctx_heads(kHeadElements);
  runtime::cpu::split_heads(dctx_heads.data(), dctx.data(), T, B, H, D);
  DeviceBuffer<float> d_dctx(dctx);
  DeviceBuffer<float> d_dctx_heads(std::vector<float>(kHeadElements, 9.f));
  runtime::cuda::split_heads(d_dctx_heads.data(), d_dctx.data(), T, B, H, D, nullptr);
  EXPECT_TRUE(identical(d_dctx_heads.download(), dctx_heads));
  runtime::cuda::split_heads(d_dctx_heads.data(), d_ctx.data(), T, B, H, D, nullptr);
  EXPECT_TRUE(identical(d_dctx_heads.download(), ctx_heads));
}

TEST_F(AttentionLayoutTest, Bf16CopiesMatchCpuBitForBit) {
  std::vector<float> qkv = gpu_test::random_vector(3 * kHeadElements, 27);
  gpu_test::round_to_bf16_inplace(qkv);
  std::vector<float> q(kHeadElements), k(kHeadElements), v(kHeadElements);
  runtime::cpu::split_qkv_heads(q.data(), k.data(), v.data(), qkv.data(), T, B, H, D);
  DeviceBuffer<uint16_t> d_qkv = gpu_test::upload_bf16(qkv);
  DeviceBuffer<uint16_t> d_q(kHeadElements), d_k(kHeadElements), d_v(kHeadElements);
  runtime::cuda::split_qkv_heads(bf16(d_q), bf16(d_k), bf16(d_v), bf16(d_qkv), T, B, H, D, nullptr);
  EXPECT_TRUE(identical(gpu_test::download_bf16(d_q), q));
  EXPECT_TRUE(identical(gpu_test::download_bf16(d_k), k));
  EXPECT_TRUE(identical(gpu_test::download_bf16(d_v), v));

  DeviceBuffer<uint16_t> d_qkv_back = gpu_test::upload_bf16(std::vector<float>(3 * kHeadElements));
  runtime::cuda::merge_qkv_heads(bf16(d_qkv_back), bf16(d_q), bf16(d_k), bf16(d_v), T, B, H, D,
                                 nullptr);
  EXPECT_TRUE(identical(gpu_test::download_bf16(d_qkv_back), qkv));

  std::vector<float> ctx(kHeadElements);
  runtime::cpu::merge_heads(ctx.data(), q.data(), T, B, H, D);
  DeviceBuffer<uint16_t> d_ctx(kHeadElements), d_heads(kHeadElements);
  runtime::cuda::merge_heads(bf16(d_ctx), bf16(d_q), T, B, H, D, nullptr);
  EXPECT_TRUE(identical(gpu_test::download_bf16(d_ctx), ctx));
  runtime::cuda::split_heads(bf16(d_heads), bf16(d_ctx), T, B, H, D, nullptr);
  EXPECT_TRUE(identical(gpu_test::download_bf16(d_heads), q));
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
