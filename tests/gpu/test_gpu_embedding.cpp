// runtime::cuda::embedding_backward with the scratch it allocates for itself (f32 dout) and with
// the caller's (bf16 dout; ops:: always passes one): the CPU's sums in row order, bit for bit,
// over vocab shards with a hot id. The op twins cover the rest of the embeddings; this path of
// the kernel they cannot reach. Skips without a device.
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

}  // namespace
