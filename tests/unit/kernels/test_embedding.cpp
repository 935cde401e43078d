// Tests of token and position embeddings: forward copies (=) or adds (+=) rows, vocab
// shards give zeros for foreign ids, backward accumulates (+=) repeated tokens in a
// thread-independent order, and position tables honour t_offset.
#include "kernel_test_util.h"
#include "runtime/kernels/cpu/embedding.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

TEST(Embedding, ForwardCopiesRowsOfTheShardAndZeroesForeignIds) {
  const int64_t rows = 12, C = 10, vocab_start = 20, vocab_rows = 8;
  const auto wte = random_vector(vocab_rows * C, 1);
  const std::vector<int32_t> tokens = {20, 27, 19, 28, 23, 0, 20, 25, 26, 100, 21, 22};
  auto out = filled(rows * C, kNaN);
  embedding_forward(out.data(), tokens.data(), wte.data(), rows, C, vocab_start, vocab_rows);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t local = tokens[r] - vocab_start;
    const bool inside = local >= 0 && local < vocab_rows;
    for (int64_t c = 0; c < C; ++c)
      ASSERT_EQ(out[r * C + c], inside ? wte[local * C + c] : 0.f) << r << "," << c;
  }
}

TEST(Embedding, BackwardAccumulatesRepeatedTokensInsideTheShard) {
  const int64_t rows = 40, C = 70, vocab_start = 5, vocab_rows = 6;
  const auto tokens = random_ints(rows, 2, 0, 14);  // repeats and ids outside [5, 11)
  const auto dout = random_vector(rows * C, 3);
  const auto dwte0 = random_vector(vocab_rows * C, 4);
  auto dwte = dwte0;
  embedding_backward(dwte.data(), dout.data(), tokens.data(), rows, C, vocab_start, vocab_rows);
  std::vector<double> want(dwte0.begin(), dwte0.end());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t local = tokens[r] - vocab_start;
    if (local < 0 || local >= vocab_rows) continue;
    for (int64_t c = 0; c < C; ++c) want[local * C + c] += dout[r * C + c];
  }
  expect_close(dwte, want, 1e-6, 1e-6, "dwte (+=)");
}

TEST(Embedding, BackwardIsBitIdenticalAcrossThreadCounts) {
  const int64_t rows = 3000, C = 200, vocab = 17;
  const auto tokens = random_ints(rows, 5, 0, vocab - 1);
  const auto dout = random_vector(rows * C, 6);
  auto run = [&] {
    auto dwte = filled(vocab * C, 0.1f);
    embedding_backward(dwte.data(), dout.data(), tokens.data(), rows, C, 0, vocab);
    return dwte;
  };
  expect_thread_count_independent(run);
}

TEST(PositionEmbedding, ForwardAddsTheRowOfEachGlobalPosition) {
  const int64_t T = 4, B = 3, C = 9, t_offset = 3, positions = 10;
  const auto wpe = random_vector(positions * C, 7);
  const auto out0 = random_vector(T * B * C, 8);
  auto out = out0;
  position_embedding_forward(out.data(), wpe.data(), T, B, C, t_offset);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = (t * B + b) * C + c;
        ASSERT_EQ(out[i], out0[i] + wpe[(t_offset + t) * C + c]);
      }
}

TEST(PositionEmbedding, BackwardSumsSamplesIntoTheShardsRowsOnly) {
  const int64_t T = 4, B = 5, C = 9, t_offset = 3, positions = 10;
  const auto dout = random_vector(T * B * C, 9);
  const auto dwpe0 = random_vector(positions * C, 10);
  auto dwpe = dwpe0;
  position_embedding_backward(dwpe.data(), dout.data(), T, B, C, t_offset);
  std::vector<double> want(dwpe0.begin(), dwpe0.end());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) want[(t_offset + t) * C + c] += dout[(t * B + b) * C + c];
  expect_close(dwpe, want, 1e-6, 1e-6, "dwpe (+=)");
  for (int64_t i = 0; i < t_offset * C; ++i)
    ASSERT_EQ(dwpe[i], dwpe0[i]) << "rows before the shard";
  for (int64_t i = (t_offset + T) * C; i < positions * C; ++i) ASSERT_EQ(dwpe[i], dwpe0[i]);
}

// Three documents per sample, starting where `starts` says, in rows [t_offset, t_offset + T):
// sample b's documents start at global positions 0 (before the rows), t_offset + 1 + b % 2 and
// t_offset + 4 (Note [Document positions] in runtime/op_args.h).
std::vector<int32_t> three_documents(int64_t T, int64_t B, int64_t t_offset) {
  std::vector<int32_t> starts(static_cast<size_t>(T * B));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      const int64_t position = t_offset + t, second = t_offset + 1 + b % 2, third = t_offset + 4;
      starts[t * B + b] = static_cast<int32_t>(position >= third    ? third
                                               : position >= second ? second
                                                                    : 0);
    }
  }
  return starts;
}

TEST(PositionEmbedding, DocumentsRestartTheirPositionsAtZero) {
  const int64_t T = 7, B = 3, C = 9, t_offset = 3, positions = 10;
  const auto starts = three_documents(T, B, t_offset);
  const auto wpe = random_vector(positions * C, 11);
  const auto out0 = random_vector(T * B * C, 12);
  auto out = out0;
  position_embedding_forward(out.data(), wpe.data(), T, B, C, t_offset, starts.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t position = t_offset + t - starts[t * B + b];
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = (t * B + b) * C + c;
        ASSERT_EQ(out[i], out0[i] + wpe[position * C + c]) << "row " << t << ", sample " << b;
      }
    }
  // Row 1 of sample 0 starts its document: position 0; row 0 continues the first one.
  EXPECT_EQ(out[(1 * B + 0) * C], out0[(1 * B + 0) * C] + wpe[0]);
  EXPECT_EQ(out[0], out0[0] + wpe[t_offset * C]);
}

// Several rows add into one position, sample by sample and row by row within a sample: exactly
// the sum a plain loop adds in that order, whatever the thread count.
TEST(PositionEmbedding, DocumentsAddEveryRowIntoItsPositionInOrder) {
  const int64_t T = 7, B = 3, C = 130, t_offset = 3, positions = 10;
  const auto starts = three_documents(T, B, t_offset);
  const auto dout = random_vector(T * B * C, 13);
  const auto dwpe0 = random_vector(positions * C, 14);
  std::vector<float> want = dwpe0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c)
        want[(t_offset + t - starts[t * B + b]) * C + c] += dout[(t * B + b) * C + c];
  const auto run = [&] {
    auto dwpe = dwpe0;
    position_embedding_backward(dwpe.data(), dout.data(), T, B, C, t_offset, starts.data());
    return dwpe;
  };
  EXPECT_TRUE(bitwise_equal(run(), want));
  expect_thread_count_independent(run);
}

}  // namespace
