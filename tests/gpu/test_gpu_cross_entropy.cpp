// GPU cross entropy (fused, padded vocabulary) and the vocab-shard pieces against the CPU
// twins: statistics within 1e-5 relative, f32 gradients within 1e-5 and bf16 within 1e-2,
// padding exactly 0, in-place gradients, bit-identical repeats. Skips without a device.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/kernels/cpu/cross_entropy.h"
#include "runtime/kernels/cpu/vocab_parallel.h"
#include "runtime/kernels/cuda/cross_entropy.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class CrossEntropyTest : public gpu_test::GpuTest {};

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

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

// Columns [from, cols) of every row are exactly 0.
int64_t nonzero_columns(const std::vector<float>& matrix, int64_t cols, int64_t from) {
  int64_t count = 0;
  for (size_t index = 0; index < matrix.size(); ++index)
    if (static_cast<int64_t>(index) % cols >= from && !(matrix[index] == 0.f)) ++count;
  return count;
}

// Sum over each row's first real_cols columns of exp(x - row_max), accumulated in double: the
// CPU twin adds 25k floats in order (about 1e-5 relative error), more than the tolerance.
std::vector<float> accurate_sum_exp(const std::vector<float>& logits,
                                    const std::vector<float>& row_max, int64_t real_cols,
                                    int64_t shard_cols) {
  std::vector<float> sums(row_max.size());
  for (size_t r = 0; r < sums.size(); ++r) {
    double sum = 0;
    for (int64_t c = 0; c < real_cols; ++c)
      sum += std::exp(logits[r * static_cast<size_t>(shard_cols) + static_cast<size_t>(c)] -
                      row_max[r]);
    sums[r] = static_cast<float>(sum);
  }
  return sums;
}

struct Shape {
  int64_t rows, vocab, padded_vocab;
};
// A vocabulary below one block of threads, one with padding, and GPT-2's.
const Shape kShapes[] = {{3, 5, 8}, {7, 1000, 1024}, {4, 50257, 50304}};

TEST_F(CrossEntropyTest, F32ForwardAndBackwardMatchCpu) {
  for (const Shape& s : kShapes) {
    const size_t n = static_cast<size_t>(s.rows * s.padded_vocab);
    const std::vector<float> logits = gpu_test::random_vector(n, 41, 5.f);
    const std::vector<int32_t> targets = random_targets(s.rows, 0, s.vocab, 42);
    const float scale = 1.f / static_cast<float>(s.rows);
    std::vector<float> losses(static_cast<size_t>(s.rows)), lse(losses.size()), dlogits(n);
    runtime::cpu::cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(),
                                        s.rows, s.vocab, s.padded_vocab);
    runtime::cpu::cross_entropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(),
                                         s.rows, s.vocab, s.padded_vocab, scale);

    DeviceBuffer<float> d_logits(logits), d_losses(losses.size()), d_lse(lse.size());
    DeviceBuffer<int32_t> d_targets(targets);
    DeviceBuffer<float> d_dlogits(std::vector<float>(n, 6.f));  // padding must be overwritten
    runtime::cuda::cross_entropy_forward(d_losses.data(), d_lse.data(), d_logits.data(),
                                         d_targets.data(), s.rows, s.vocab, s.padded_vocab,
                                         nullptr);
    const std::vector<float> gpu_lse = d_lse.download();
    EXPECT_CLOSE(d_losses.download(), losses, 1e-5) << "losses, vocab=" << s.vocab;
    EXPECT_CLOSE(gpu_lse, lse, 1e-5) << "lse, vocab=" << s.vocab;

    runtime::cuda::cross_entropy_backward(d_dlogits.data(), d_logits.data(), d_lse.data(),
                                          d_targets.data(), s.rows, s.vocab, s.padded_vocab, scale,
                                          nullptr);
    const std::vector<float> gpu_dlogits = d_dlogits.download();
    EXPECT_CLOSE(gpu_dlogits, dlogits, 1e-5) << "dlogits, vocab=" << s.vocab;
    EXPECT_EQ(nonzero_columns(gpu_dlogits, s.padded_vocab, s.vocab), 0) << "padding gradient";

    // In place (dlogits aliasing logits) gives the same bits.
    runtime::cuda::cross_entropy_backward(d_logits.data(), d_logits.data(), d_lse.data(),
                                          d_targets.data(), s.rows, s.vocab, s.padded_vocab, scale,
                                          nullptr);
    EXPECT_TRUE(identical(d_logits.download(), gpu_dlogits)) << "in place, vocab=" << s.vocab;
  }
}

TEST_F(CrossEntropyTest, Bf16LogitsMatchCpuOnRoundedInputs) {
  for (const Shape& s : kShapes) {
    const size_t n = static_cast<size_t>(s.rows * s.padded_vocab);
    std::vector<float> logits = gpu_test::random_vector(n, 43, 5.f);
    gpu_test::round_to_bf16_inplace(logits);
    const std::vector<int32_t> targets = random_targets(s.rows, 0, s.vocab, 44);
    const float scale = 0.5f;
    std::vector<float> losses(static_cast<size_t>(s.rows)), lse(losses.size()), dlogits(n);
    runtime::cpu::cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(),
                                        s.rows, s.vocab, s.padded_vocab);
    runtime::cpu::cross_entropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(),
                                         s.rows, s.vocab, s.padded_vocab, scale);

    DeviceBuffer<uint16_t> d_logits = gpu_test::upload_bf16(logits);
    DeviceBuffer<float> d_losses(losses.size()), d_lse(lse.size());
    DeviceBuffer<int32_t> d_targets(targets);
    DeviceBuffer<uint16_t> d_dlogits = gpu_test::upload_bf16(std::vector<float>(n, 6.f));
    runtime::cuda::cross_entropy_forward(d_losses.data(), d_lse.data(), bf16(d_logits),
                                         d_targets.data(), s.rows, s.vocab, s.padded_vocab,
                                         nullptr);
    // The statistics are fp32 over the same (rounded) inputs: as close as in f32.
    EXPECT_CLOSE(d_losses.download(), losses, 1e-5) << "losses, vocab=" << s.vocab;
    EXPECT_CLOSE(d_lse.download(), lse, 1e-5) << "lse, vocab=" << s.vocab;

    runtime::cuda::cross_entropy_backward(bf16(d_dlogits), bf16(d_logits), d_lse.data(),
                                          d_targets.data(), s.rows, s.vocab, s.padded_vocab, scale,
                                          nullptr);
    const std::vector<float> gpu_dlogits = gpu_test::download_bf16(d_dlogits);
    EXPECT_CLOSE(gpu_dlogits, dlogits, 1e-2) << "dlogits, vocab=" << s.vocab;
    EXPECT_EQ(nonzero_columns(gpu_dlogits, s.padded_vocab, s.vocab), 0) << "padding gradient";
  }
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

struct ShardShape {
  int64_t rows, vocab_start, real_cols, shard_cols;
};
// A full shard, the last shard with padding, a shard of padding only, and a wide shard.
const ShardShape kShards[] = {
    {5, 0, 256, 256}, {6, 512, 200, 256}, {3, 768, 0, 64}, {4, 25152, 25105, 25152}};

TEST_F(CrossEntropyTest, VocabShardPiecesMatchCpu) {
  for (const ShardShape& s : kShards) {
    const size_t n = static_cast<size_t>(s.rows * s.shard_cols);
    const std::vector<float> logits = gpu_test::random_vector(n, 51, 5.f);
    // Targets inside and outside the shard's real columns.
    const std::vector<int32_t> targets =
        random_targets(s.rows, s.vocab_start - 40, s.vocab_start + s.shard_cols + 40, 52);
    const size_t rows = static_cast<size_t>(s.rows);
    std::vector<float> row_max(rows), global_max(rows), row_sum(rows), target_logit(rows);
    std::vector<float> lse(rows), dlogits(n);
    runtime::cpu::vocab_shard_max(row_max.data(), logits.data(), s.rows, s.real_cols, s.shard_cols);
    // Another shard's max takes part: the sum uses a global max above this shard's.
    for (size_t r = 0; r < rows; ++r) global_max[r] = std::max(row_max[r], 4.5f) + 0.25f;
    runtime::cpu::vocab_shard_sum_exp(row_sum.data(), logits.data(), global_max.data(), s.rows,
                                      s.real_cols, s.shard_cols);
    runtime::cpu::vocab_shard_target_logit(target_logit.data(), logits.data(), targets.data(),
                                           s.rows, s.vocab_start, s.real_cols, s.shard_cols);
    for (size_t r = 0; r < rows; ++r) lse[r] = global_max[r] + std::log(row_sum[r] + 3.f);
    runtime::cpu::vocab_shard_cross_entropy_backward(dlogits.data(), logits.data(), lse.data(),
                                                     targets.data(), s.rows, s.vocab_start,
                                                     s.real_cols, s.shard_cols, 0.25f);

    DeviceBuffer<float> d_logits(logits), d_global_max(global_max), d_lse(lse);
    DeviceBuffer<int32_t> d_targets(targets);
    DeviceBuffer<float> d_row_max(rows), d_row_sum(rows), d_target_logit(rows);
    DeviceBuffer<float> d_dlogits(std::vector<float>(n, 6.f));
    runtime::cuda::vocab_shard_max(d_row_max.data(), d_logits.data(), s.rows, s.real_cols,
                                   s.shard_cols, nullptr);
    runtime::cuda::vocab_shard_sum_exp(d_row_sum.data(), d_logits.data(), d_global_max.data(),
                                       s.rows, s.real_cols, s.shard_cols, nullptr);
    runtime::cuda::vocab_shard_target_logit(d_target_logit.data(), d_logits.data(),
                                            d_targets.data(), s.rows, s.vocab_start, s.real_cols,
                                            s.shard_cols, nullptr);
    runtime::cuda::vocab_shard_cross_entropy_backward(
        d_dlogits.data(), d_logits.data(), d_lse.data(), d_targets.data(), s.rows, s.vocab_start,
        s.real_cols, s.shard_cols, 0.25f, nullptr);

    // The max is one of the inputs and the target logit a copy: both exact.
    EXPECT_TRUE(identical(d_row_max.download(), row_max)) << "max, shard at " << s.vocab_start;
    EXPECT_TRUE(identical(d_target_logit.download(), target_logit)) << "target logit";
    const std::vector<float> sums = d_row_sum.download();
    EXPECT_CLOSE(sums, row_sum, 1e-4) << "sum_exp against the CPU twin";
    if (s.real_cols == 0) {
      EXPECT_TRUE(identical(sums, row_sum)) << "sum of nothing";
      EXPECT_EQ(row_max[0], -std::numeric_limits<float>::infinity());
    } else {
      EXPECT_CLOSE(sums, accurate_sum_exp(logits, global_max, s.real_cols, s.shard_cols), 1e-5)
          << "sum_exp, shard at " << s.vocab_start;
    }
    const std::vector<float> gpu_dlogits = d_dlogits.download();
    EXPECT_CLOSE(gpu_dlogits, dlogits, 1e-5) << "dlogits, shard at " << s.vocab_start;
    EXPECT_EQ(nonzero_columns(gpu_dlogits, s.shard_cols, s.real_cols), 0) << "padding gradient";

    // bf16 logits: the same pieces on the rounded values.
    std::vector<float> rounded = logits;
    gpu_test::round_to_bf16_inplace(rounded);
    std::vector<float> bf_max(rows), bf_sum(rows), bf_target(rows), bf_dlogits(n);
    runtime::cpu::vocab_shard_max(bf_max.data(), rounded.data(), s.rows, s.real_cols, s.shard_cols);
    runtime::cpu::vocab_shard_sum_exp(bf_sum.data(), rounded.data(), global_max.data(), s.rows,
                                      s.real_cols, s.shard_cols);
    runtime::cpu::vocab_shard_target_logit(bf_target.data(), rounded.data(), targets.data(), s.rows,
                                           s.vocab_start, s.real_cols, s.shard_cols);
    runtime::cpu::vocab_shard_cross_entropy_backward(bf_dlogits.data(), rounded.data(), lse.data(),
                                                     targets.data(), s.rows, s.vocab_start,
                                                     s.real_cols, s.shard_cols, 0.25f);
    DeviceBuffer<uint16_t> d_rounded = gpu_test::upload_bf16(rounded);
    DeviceBuffer<uint16_t> d_bf_dlogits = gpu_test::upload_bf16(std::vector<float>(n, 6.f));
    runtime::cuda::vocab_shard_max(d_row_max.data(), bf16(d_rounded), s.rows, s.real_cols,
                                   s.shard_cols, nullptr);
    runtime::cuda::vocab_shard_sum_exp(d_row_sum.data(), bf16(d_rounded), d_global_max.data(),
                                       s.rows, s.real_cols, s.shard_cols, nullptr);
    runtime::cuda::vocab_shard_target_logit(d_target_logit.data(), bf16(d_rounded),
                                            d_targets.data(), s.rows, s.vocab_start, s.real_cols,
                                            s.shard_cols, nullptr);
    runtime::cuda::vocab_shard_cross_entropy_backward(
        bf16(d_bf_dlogits), bf16(d_rounded), d_lse.data(), d_targets.data(), s.rows, s.vocab_start,
        s.real_cols, s.shard_cols, 0.25f, nullptr);
    EXPECT_TRUE(identical(d_row_max.download(), bf_max)) << "bf16 max";
    EXPECT_TRUE(identical(d_target_logit.download(), bf_target)) << "bf16 target logit";
    const std::vector<float> bf_sums = d_row_sum.download();
    EXPECT_CLOSE(bf_sums, bf_sum, 1e-4) << "bf16 sum_exp against the CPU twin";
    EXPECT_CLOSE(bf_sums, accurate_sum_exp(rounded, global_max, s.real_cols, s.shard_cols), 1e-5)
        << "bf16 sum_exp";
    const std::vector<float> gpu_bf_dlogits = gpu_test::download_bf16(d_bf_dlogits);
    EXPECT_CLOSE(gpu_bf_dlogits, bf_dlogits, 1e-2) << "bf16 dlogits";
    EXPECT_EQ(nonzero_columns(gpu_bf_dlogits, s.shard_cols, s.real_cols), 0) << "bf16 padding";
  }
}

}  // namespace
