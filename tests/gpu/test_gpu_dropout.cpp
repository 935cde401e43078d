// runtime::cuda dropout against runtime::cpu: masks bit-identical (Note [Dropout RNG]) for
// unsharded calls and for sequence, head and sample shards of the same global tensor, with rows
// that do and do not start on a Philox block; f32 outputs exact, bf16 outputs = rounded CPU ones.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/kernels/cpu/dropout.h"
#include "runtime/kernels/cuda/dropout.h"
#include "runtime/kernels/cuda/stream.h"
#include "runtime/philox.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;
using runtime::DropoutKey;

class GpuDropout : public gpu_test::GpuTest {};

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

struct Dropped {
  std::vector<float> out;
  std::vector<uint8_t> mask;
};

const DropoutKey kKey = runtime::make_dropout_key(1234, 7, 2, runtime::DropoutOp::mlp_out);

Dropped cpu_hidden(const std::vector<float>& x, int64_t T, int64_t B, int64_t C, int64_t t_offset,
                   int64_t sample_offset, float p) {
  Dropped result{std::vector<float>(x.size()), std::vector<uint8_t>(x.size())};
  runtime::cpu::dropout_hidden_forward(result.out.data(), result.mask.data(), x.data(), T, B, C,
                                       t_offset, sample_offset, p, kKey);
  return result;
}

Dropped gpu_hidden(const std::vector<float>& x, int64_t T, int64_t B, int64_t C, int64_t t_offset,
                   int64_t sample_offset, float p) {
  runtime::cuda::CudaStream stream;
  DeviceBuffer<float> x_dev(x), out_dev(x.size());
  DeviceBuffer<uint8_t> mask_dev(x.size());
  runtime::cuda::dropout_hidden_forward(out_dev.data(), mask_dev.data(), x_dev.data(), T, B, C,
                                        t_offset, sample_offset, p, kKey, stream.get());
  return Dropped{out_dev.download(), mask_dev.download()};
}

Dropped gpu_attention(const std::vector<float>& x, int64_t B, int64_t H, int64_t T,
                      int64_t head_offset, int64_t sample_offset, float p) {
  runtime::cuda::CudaStream stream;
  DeviceBuffer<float> x_dev(x), out_dev(x.size());
  DeviceBuffer<uint8_t> mask_dev(x.size());
  runtime::cuda::dropout_attention_forward(out_dev.data(), mask_dev.data(), x_dev.data(), B, H, T,
                                           head_offset, sample_offset, p, kKey, stream.get());
  return Dropped{out_dev.download(), mask_dev.download()};
}

double dropped_fraction(const std::vector<uint8_t>& mask) {
  return static_cast<double>(std::count(mask.begin(), mask.end(), uint8_t{0})) /
         static_cast<double>(mask.size());
}

TEST_F(GpuDropout, HiddenMatchesCpuBitForBit) {
  const int64_t T = 13, B = 3;
  for (const int64_t C : {int64_t{37}, int64_t{64}, int64_t{1}}) {  // unaligned and aligned rows
    const std::vector<float> x = gpu_test::random_vector(T * B * C, 21);
    const Dropped expected = cpu_hidden(x, T, B, C, 5, 11, 0.3f);
    const Dropped actual = gpu_hidden(x, T, B, C, 5, 11, 0.3f);
    EXPECT_EQ(actual.mask, expected.mask) << "C = " << C;
    EXPECT_EQ(actual.out, expected.out) << "C = " << C;
    if (C > 1) {
      EXPECT_GT(dropped_fraction(actual.mask), 0.2);
      EXPECT_LT(dropped_fraction(actual.mask), 0.4);
    }
  }
}

TEST_F(GpuDropout, SequenceAndSampleShardsDrawTheUnshardedMask) {
  const int64_t T = 16, B = 4, C = 30, sample_offset = 8;
  const std::vector<float> x = gpu_test::random_vector(T * B * C, 22);
  const Dropped full = cpu_hidden(x, T, B, C, 0, sample_offset, 0.25f);
  // Sequence shards (tp/sp): rows [t0, t0 + 4) of [s, b, h] are a contiguous slice.
  for (int64_t t0 = 0; t0 < T; t0 += 4) {
    const int64_t begin = t0 * B * C, count = 4 * B * C;
    const std::vector<float> shard(x.begin() + begin, x.begin() + begin + count);
    const Dropped actual = gpu_hidden(shard, 4, B, C, t0, sample_offset, 0.25f);
    EXPECT_EQ(actual.mask,
              std::vector<uint8_t>(full.mask.begin() + begin, full.mask.begin() + begin + count))
        << "t_offset = " << t0;
  }
  // Sample shards (dp): samples [2, 4) of the batch as their own (T, 2, C) tensor.
  std::vector<float> shard;
  std::vector<uint8_t> expected_mask;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t begin = (t * B + 2) * C;
    shard.insert(shard.end(), x.begin() + begin, x.begin() + begin + 2 * C);
    expected_mask.insert(expected_mask.end(), full.mask.begin() + begin,
                         full.mask.begin() + begin + 2 * C);
  }
  EXPECT_EQ(gpu_hidden(shard, T, 2, C, 0, sample_offset + 2, 0.25f).mask, expected_mask);
}

TEST_F(GpuDropout, AttentionHeadShardsDrawTheUnshardedMask) {
  const int64_t B = 2, H = 4, T = 19, sample_offset = 3;
  const float p = 0.1f;
  const std::vector<float> x = gpu_test::random_vector(B * H * T * T, 23);
  Dropped full{std::vector<float>(x.size()), std::vector<uint8_t>(x.size())};
  runtime::cpu::dropout_attention_forward(full.out.data(), full.mask.data(), x.data(), B, H, T, 0,
                                          sample_offset, p, kKey);
  const Dropped actual = gpu_attention(x, B, H, T, 0, sample_offset, p);
  EXPECT_EQ(actual.mask, full.mask);
  EXPECT_EQ(actual.out, full.out);
  // Heads [2, 4) (tp = 2, rank 1): local (b, h, i, j) is global (b, 2 + h, i, j).
  const int64_t head_block = T * T;
  std::vector<float> shard;
  std::vector<uint8_t> expected_mask;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t begin = (b * H + 2) * head_block;
    shard.insert(shard.end(), x.begin() + begin, x.begin() + begin + 2 * head_block);
    expected_mask.insert(expected_mask.end(), full.mask.begin() + begin,
                         full.mask.begin() + begin + 2 * head_block);
  }
  EXPECT_EQ(gpu_attention(shard, B, 2, T, 2, sample_offset, p).mask, expected_mask);
}

TEST_F(GpuDropout, Bf16UsesTheSameMask) {
  runtime::cuda::CudaStream stream;
  const int64_t T = 9, B = 2, C = 45;
  const float p = 0.4f;
  std::vector<float> x = gpu_test::random_vector(T * B * C, 24);
  gpu_test::round_to_bf16_inplace(x);
  const Dropped expected = cpu_hidden(x, T, B, C, 3, 0, p);
  auto x_dev = gpu_test::upload_bf16(x);
  DeviceBuffer<uint16_t> out_dev(x.size());
  DeviceBuffer<uint8_t> mask_dev(x.size());
  runtime::cuda::dropout_hidden_forward(bf16(out_dev), mask_dev.data(), bf16(x_dev), T, B, C, 3, 0,
                                        p, kKey, stream.get());
  EXPECT_EQ(mask_dev.download(), expected.mask);
  std::vector<float> expected_out = expected.out;
  gpu_test::round_to_bf16_inplace(expected_out);
  EXPECT_EQ(gpu_test::download_bf16(out_dev), expected_out);

  // apply and backward from that mask, in place.
  runtime::cuda::dropout_apply(bf16(x_dev), bf16(x_dev), mask_dev.data(), T * B * C, p,
                               stream.get());
  EXPECT_EQ(gpu_test::download_bf16(x_dev), expected_out);
}

TEST_F(GpuDropout, ApplyAndBackwardMatchCpu) {
  runtime::cuda::CudaStream stream;
  const int64_t n = 5000;
  const float p = 0.2f;
  const std::vector<float> x = gpu_test::random_vector(n, 25),
                           dout = gpu_test::random_vector(n, 26);
  const Dropped forward = cpu_hidden(x, 50, 4, 25, 0, 0, p);
  std::vector<float> applied(n), dinp(n);
  runtime::cpu::dropout_apply(applied.data(), x.data(), forward.mask.data(), n, p);
  runtime::cpu::dropout_backward(dinp.data(), dout.data(), forward.mask.data(), n, p);
  EXPECT_EQ(applied, forward.out);

  DeviceBuffer<float> x_dev(x), dout_dev(dout), out_dev(n);
  DeviceBuffer<uint8_t> mask_dev(forward.mask);
  runtime::cuda::dropout_apply(out_dev.data(), x_dev.data(), mask_dev.data(), n, p, stream.get());
  EXPECT_EQ(out_dev.download(), applied);
  runtime::cuda::dropout_backward(dout_dev.data(), dout_dev.data(), mask_dev.data(), n, p,
                                  stream.get());
  EXPECT_EQ(dout_dev.download(), dinp);
}

TEST_F(GpuDropout, ZeroProbabilityKeepsEverything) {
  const int64_t T = 4, B = 2, C = 33;
  const std::vector<float> x = gpu_test::random_vector(T * B * C, 27);
  const Dropped actual = gpu_hidden(x, T, B, C, 0, 0, 0.f);
  EXPECT_EQ(actual.mask, std::vector<uint8_t>(x.size(), 1));
  EXPECT_EQ(actual.out, x);
}

}  // namespace
