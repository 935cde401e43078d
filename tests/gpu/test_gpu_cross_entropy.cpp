// GPU cross entropy where the op twins do not reach: a target outside the vocabulary gives NaN
// (loss and gradient row) instead of a wrong finite number, and at GPT-2's vocabulary (50257
// columns padded to 50304, larger than any the twins draw) repeated runs are bit-identical.
// Skips without a device.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/kernels/cuda/cross_entropy.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class CrossEntropyTest : public gpu_test::GpuTest {};

bool identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int32_t> random_targets(int64_t rows, int64_t low, int64_t high, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int32_t> uniform(static_cast<int32_t>(low),
                                                 static_cast<int32_t>(high - 1));
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int32_t& target : targets) target = uniform(generator);
  return targets;
}

TEST_F(CrossEntropyTest, TargetOutsideVocabGivesNaN) {
  const int64_t rows = 2, vocab = 10, padded_vocab = 16;
  DeviceBuffer<float> d_logits(gpu_test::random_vector(rows * padded_vocab, 45));
  DeviceBuffer<int32_t> d_targets(std::vector<int32_t>{3, 12});  // 12 is a padding column
  DeviceBuffer<float> d_losses(rows), d_lse(rows), d_dlogits(rows * padded_vocab);
  runtime::cuda::cross_entropy_forward(d_losses.data(), d_lse.data(), d_logits.data(),
                                       d_targets.data(), rows, vocab, padded_vocab, nullptr);
  runtime::cuda::cross_entropy_backward(d_dlogits.data(), d_logits.data(), d_lse.data(),
                                        d_targets.data(), rows, vocab, padded_vocab, 1.f, nullptr);
  const std::vector<float> losses = d_losses.download(), dlogits = d_dlogits.download();
  EXPECT_TRUE(std::isfinite(losses[0]));
  EXPECT_TRUE(std::isnan(losses[1]));
  EXPECT_TRUE(std::isfinite(dlogits[0]));
  EXPECT_TRUE(std::isnan(dlogits[padded_vocab]));
}

TEST_F(CrossEntropyTest, RepeatedRunsAreBitIdentical) {
  const int64_t rows = 64, vocab = 50257, padded_vocab = 50304;
  const size_t n = static_cast<size_t>(rows * padded_vocab);
  DeviceBuffer<float> d_logits(gpu_test::random_vector(n, 46, 8.f));
  DeviceBuffer<int32_t> d_targets(random_targets(rows, 0, vocab, 47));
  DeviceBuffer<float> d_losses(rows), d_lse(rows), d_dlogits(n);
  std::vector<float> first_losses, first_dlogits;
  for (int run = 0; run < 2; ++run) {
    runtime::cuda::cross_entropy_forward(d_losses.data(), d_lse.data(), d_logits.data(),
                                         d_targets.data(), rows, vocab, padded_vocab, nullptr);
    runtime::cuda::cross_entropy_backward(d_dlogits.data(), d_logits.data(), d_lse.data(),
                                          d_targets.data(), rows, vocab, padded_vocab, 0.1f,
                                          nullptr);
    if (run == 0) {
      first_losses = d_losses.download();
      first_dlogits = d_dlogits.download();
    } else {
      EXPECT_TRUE(identical(d_losses.download(), first_losses));
      EXPECT_TRUE(identical(d_dlogits.download(), first_dlogits));
    }
  }
}

}  // namespace
