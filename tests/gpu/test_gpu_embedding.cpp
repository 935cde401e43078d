// runtime::cuda embeddings against runtime::cpu. Every result is a copy or a sum in the CPU's
// order, so all must match exactly: f32 tables and gradients, bf16 outputs = rounded CPU ones,
// token backward over a vocab shard with repeated ids (a hot id included) in row order.
#include <cstdint>
#include <random>
#include <vector>

#include "runtime/kernels/cpu/embedding.h"
#include "runtime/kernels/cuda/embedding.h"
#include "runtime/kernels/cuda/stream.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class GpuEmbedding : public gpu_test::GpuTest {};

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

std::vector<float> rounded(std::vector<float> values) {
  gpu_test::round_to_bf16_inplace(values);
  return values;
}

constexpr int64_t kT = 64, kB = 8, kRows = kT * kB, kC = 48, kVocab = 40;

// Ids in [0, kVocab) with every fifth one the hot id 10.
std::vector<int32_t> random_tokens(uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  std::vector<int32_t> tokens(kRows);
  for (int64_t r = 0; r < kRows; ++r) tokens[r] = r % 5 == 0 ? 10 : id(generator);
  return tokens;
}

struct Shard {
  int64_t vocab_start, vocab_rows;
};

TEST_F(GpuEmbedding, TokenForwardMatchesCpu) {
  runtime::cuda::CudaStream stream;
  const std::vector<int32_t> tokens = random_tokens(41);
  DeviceBuffer<int32_t> tokens_dev(tokens);
  for (const Shard shard : {Shard{0, kVocab}, Shard{8, 20}}) {
    const std::vector<float> wte = gpu_test::random_vector(shard.vocab_rows * kC, 42);
    std::vector<float> expected(kRows * kC);
    runtime::cpu::embedding_forward(expected.data(), tokens.data(), wte.data(), kRows, kC,
                                    shard.vocab_start, shard.vocab_rows);
    DeviceBuffer<float> wte_dev(wte), out_dev(gpu_test::random_vector(kRows * kC, 43));
    runtime::cuda::embedding_forward(out_dev.data(), tokens_dev.data(), wte_dev.data(), kRows, kC,
                                     shard.vocab_start, shard.vocab_rows, stream.get());
    EXPECT_EQ(out_dev.download(), expected) << "vocab_start = " << shard.vocab_start;

    auto wte16_dev = gpu_test::upload_bf16(wte);
    DeviceBuffer<uint16_t> out16_dev(kRows * kC);
    runtime::cuda::embedding_forward(bf16(out16_dev), tokens_dev.data(), bf16(wte16_dev), kRows, kC,
                                     shard.vocab_start, shard.vocab_rows, stream.get());
    EXPECT_EQ(gpu_test::download_bf16(out16_dev), rounded(expected));
  }
}

TEST_F(GpuEmbedding, TokenBackwardAddsInRowOrder) {
  runtime::cuda::CudaStream stream;
  const std::vector<int32_t> tokens = random_tokens(44);
  DeviceBuffer<int32_t> tokens_dev(tokens);
  const std::vector<float> dout = gpu_test::random_vector(kRows * kC, 45);
  const std::vector<float> dout16 = rounded(dout);
  DeviceBuffer<float> dout_dev(dout);
  auto dout16_dev = gpu_test::upload_bf16(dout16);
  for (const Shard shard : {Shard{0, kVocab}, Shard{8, 20}, Shard{35, 12}}) {
    SCOPED_TRACE(testing::Message() << "vocab_start = " << shard.vocab_start);
    const std::vector<float> dwte = gpu_test::random_vector(shard.vocab_rows * kC, 46);
    std::vector<float> expected = dwte;
    runtime::cpu::embedding_backward(expected.data(), dout.data(), tokens.data(), kRows, kC,
                                     shard.vocab_start, shard.vocab_rows);
    DeviceBuffer<float> dwte_dev(dwte);
    runtime::cuda::embedding_backward(dwte_dev.data(), dout_dev.data(), tokens_dev.data(), kRows,
                                      kC, shard.vocab_start, shard.vocab_rows, nullptr,
                                      stream.get());
    EXPECT_EQ(dwte_dev.download(), expected);

    // Caller-provided scratch, bf16 dout.
    std::vector<float> expected16 = dwte;
    runtime::cpu::embedding_backward(expected16.data(), dout16.data(), tokens.data(), kRows, kC,
                                     shard.vocab_start, shard.vocab_rows);
    DeviceBuffer<uint8_t> scratch(
        runtime::cuda::embedding_backward_scratch_bytes(kRows, shard.vocab_rows));
    DeviceBuffer<float> dwte16_dev(dwte);
    runtime::cuda::embedding_backward(dwte16_dev.data(), bf16(dout16_dev), tokens_dev.data(), kRows,
                                      kC, shard.vocab_start, shard.vocab_rows, scratch.data(),
                                      stream.get());
    EXPECT_EQ(dwte16_dev.download(), expected16);
  }
}

TEST_F(GpuEmbedding, PositionForwardAndBackwardMatchCpu) {
  runtime::cuda::CudaStream stream;
  const int64_t T = 16, B = 3, C = 20, t_offset = 4, positions = 32;
  const std::vector<float> wpe = gpu_test::random_vector(positions * C, 47);
  const std::vector<float> out = gpu_test::random_vector(T * B * C, 48);
  std::vector<float> expected = out;
  runtime::cpu::position_embedding_forward(expected.data(), wpe.data(), T, B, C, t_offset);
  DeviceBuffer<float> wpe_dev(wpe), out_dev(out);
  runtime::cuda::position_embedding_forward(out_dev.data(), wpe_dev.data(), T, B, C, t_offset,
                                            stream.get());
  EXPECT_EQ(out_dev.download(), expected);

  const std::vector<float> wpe16 = rounded(wpe), out16 = rounded(out);
  std::vector<float> expected16 = out16;
  runtime::cpu::position_embedding_forward(expected16.data(), wpe16.data(), T, B, C, t_offset);
  auto wpe16_dev = gpu_test::upload_bf16(wpe16);
  auto out16_dev = gpu_test::upload_bf16(out16);
  runtime::cuda::position_embedding_forward(bf16(out16_dev), bf16(wpe16_dev), T, B, C, t_offset,
                                            stream.get());
  EXPECT_EQ(gpu_test::download_bf16(out16_dev), rounded(expected16));

  const std::vector<float> dwpe = gpu_test::random_vector(positions * C, 49);
  const std::vector<float> dout = gpu_test::random_vector(T * B * C, 50);
  std::vector<float> expected_dwpe = dwpe;
  runtime::cpu::position_embedding_backward(expected_dwpe.data(), dout.data(), T, B, C, t_offset);
  DeviceBuffer<float> dwpe_dev(dwpe), dout_dev(dout);
  runtime::cuda::position_embedding_backward(dwpe_dev.data(), dout_dev.data(), T, B, C, t_offset,
                                             stream.get());
  EXPECT_EQ(dwpe_dev.download(), expected_dwpe);

  const std::vector<float> dout16 = rounded(dout);
  std::vector<float> expected_dwpe16 = dwpe;
  runtime::cpu::position_embedding_backward(expected_dwpe16.data(), dout16.data(), T, B, C,
                                            t_offset);
  DeviceBuffer<float> dwpe16_dev(dwpe);
  auto dout16_dev = gpu_test::upload_bf16(dout16);
  runtime::cuda::position_embedding_backward(dwpe16_dev.data(), bf16(dout16_dev), T, B, C, t_offset,
                                             stream.get());
  EXPECT_EQ(dwpe16_dev.download(), expected_dwpe16);
}

}  // namespace
