// GPT samples: split boundaries by weight, in-order global batches with wraparound,
// the seeded per-epoch permutation (a uniform, deterministic permutation), vocab check.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "data_test_util.h"
#include "trainer/data/gpt_sampler.h"

namespace trainer {
namespace {

using testing::input_error_of;
using testing::ScratchDir;

// A dataset whose token at stream position p is p % modulus, split over a few documents.
std::string write_counting_dataset(const ScratchDir& dir, int64_t num_tokens,
                                   int32_t modulus = 60000) {
  const std::string prefix = dir.path("counting");
  IndexedDatasetWriter writer(prefix, TokenDType::uint16);
  std::vector<int32_t> document;
  for (int64_t p = 0; p < num_tokens; ++p) {
    document.push_back(static_cast<int32_t>(p % modulus));
    if (document.size() == 7 || p + 1 == num_tokens) {
      writer.add_document(document);
      document.clear();
    }
  }
  writer.finish();
  return prefix;
}

// The sample id a sampler drew, recovered from its first token (token = stream position).
int64_t drawn_id(const GptSampler& sampler, int64_t index, int64_t seq_length) {
  std::vector<int32_t> tokens(seq_length + 1);
  sampler.sample(index, tokens.data());
  for (int64_t i = 0; i <= seq_length; ++i) EXPECT_EQ(tokens[i], tokens[0] + i);
  EXPECT_EQ(tokens[0] % seq_length, 0);
  return tokens[0] / seq_length;
}

TEST(SplitSamples, BoundariesFollowCumulativeWeights) {
  ScratchDir dir;
  IndexedDataset dataset(write_counting_dataset(dir, 1001));  // (1001 - 1) / 10 = 100 samples
  auto ranges = split_samples(dataset, 10, {98, 2});
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].first, 0);
  EXPECT_EQ(ranges[0].count, 98);
  EXPECT_EQ(ranges[1].first, 98);
  EXPECT_EQ(ranges[1].count, 2);

  ranges = split_samples(dataset, 10, {1, 1, 1});  // floor(33.3), floor(66.7), 100
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].count, 33);
  EXPECT_EQ(ranges[1].first, 33);
  EXPECT_EQ(ranges[1].count, 33);
  EXPECT_EQ(ranges[2].first, 66);
  EXPECT_EQ(ranges[2].count, 34);

  ranges = split_samples(dataset, 10, {1, 0});  // a zero weight may be empty
  EXPECT_EQ(ranges[0].count, 100);
  EXPECT_EQ(ranges[1].first, 100);
  EXPECT_EQ(ranges[1].count, 0);

  ranges = split_samples(dataset, 7, {1});  // (1001 - 1) / 7 = 142 samples
  EXPECT_EQ(ranges[0].count, 142);
}

TEST(SplitSamples, TooFewTokensNamesDatasetTokensAndSeqLength) {
  ScratchDir dir;
  IndexedDataset dataset(write_counting_dataset(dir, 41));
  EXPECT_EQ(split_samples(dataset, 20, {98, 2})[1].count, 1);  // 2 samples: 1 + 1 is enough
  // 1 sample: floor(0.98) leaves the train range empty.
  std::string message = input_error_of([&] { split_samples(dataset, 40, {98, 2}); });
  EXPECT_NE(message.find(dataset.prefix()), std::string::npos) << message;
  EXPECT_NE(message.find("41 tokens"), std::string::npos) << message;
  EXPECT_NE(message.find("seq_length 40"), std::string::npos) << message;
  EXPECT_NE(message.find("range 0"), std::string::npos) << message;
  message = input_error_of([&] { split_samples(dataset, 41, {1}); });  // no sample at all
  EXPECT_NE(message.find("0 samples"), std::string::npos) << message;
  EXPECT_NE(input_error_of([&] {
              split_samples(dataset, 8, {1, -1});
            }).find("weight[1] = -1"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] {
              split_samples(dataset, 8, {0, 0});
            }).find("positive sum"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { split_samples(dataset, 0, {1}); }).find("seq_length 0"),
            std::string::npos);
}

TEST(GptSampler, InOrderGlobalBatchesWrapAround) {
  ScratchDir dir;
  IndexedDataset dataset(write_counting_dataset(dir, 41));  // 10 samples of seq_length 4
  const GptSampler sampler(dataset, 4, SampleRange{0, 10}, /*shuffle=*/false, 1234, 60000);
  EXPECT_EQ(sampler.num_samples(), 10);
  constexpr int64_t kGlobalBatch = 3;
  for (int64_t batch = 0; batch < 8; ++batch) {
    for (int64_t j = 0; j < kGlobalBatch; ++j) {
      const int64_t index = batch * kGlobalBatch + j;
      EXPECT_EQ(drawn_id(sampler, index, 4), index % 10) << "batch " << batch;
    }
  }
  // Batch 3 holds samples 9, 0, 1: the tokens of sample 9 end at the stream's last token.
  std::vector<int32_t> tokens(5);
  sampler.sample(9, tokens.data());
  EXPECT_EQ(tokens, (std::vector<int32_t>{36, 37, 38, 39, 40}));
}

TEST(GptSampler, InOrderRangeOffset) {
  ScratchDir dir;
  IndexedDataset dataset(write_counting_dataset(dir, 41));
  const GptSampler validation(dataset, 4, SampleRange{7, 3}, false, 1234, 60000);
  for (int64_t index = 0; index < 9; ++index) {
    EXPECT_EQ(drawn_id(validation, index, 4), 7 + index % 3);
  }
}

std::vector<int64_t> epoch_order(const GptSampler& sampler, int64_t epoch, int64_t seq_length) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < sampler.num_samples(); ++i) {
    ids.push_back(drawn_id(sampler, epoch * sampler.num_samples() + i, seq_length));
  }
  return ids;
}

TEST(GptSampler, ShuffleIsAPermutationOfTheRangePerEpoch) {
  ScratchDir dir;
  IndexedDataset dataset(write_counting_dataset(dir, 50 * 3 + 1));  // 50 samples, seq_length 3
  const SampleRange range{5, 40};
  const GptSampler sampler(dataset, 3, range, /*shuffle=*/true, 99, 60000);
  std::vector<int64_t> in_order(range.count);
  std::iota(in_order.begin(), in_order.end(), range.first);
  std::vector<std::vector<int64_t>> epochs;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    std::vector<int64_t> order = epoch_order(sampler, epoch, 3);
    EXPECT_NE(order, in_order) << "epoch " << epoch << " was not shuffled";
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, in_order) << "epoch " << epoch << " is not a permutation";
    epochs.push_back(order);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);

  // Deterministic: a fresh sampler, visiting epochs out of order, repeats the draws.
  const GptSampler again(dataset, 3, range, true, 99, 60000);
  EXPECT_EQ(epoch_order(again, 2, 3), epochs[2]);
  EXPECT_EQ(epoch_order(again, 0, 3), epochs[0]);
  const GptSampler other_seed(dataset, 3, range, true, 100, 60000);
  EXPECT_NE(epoch_order(other_seed, 0, 3), epochs[0]);
}

// Pins the permutation recipe (Note [Portable shuffle]): resumed runs and other
// machines must draw the same samples, so a change here breaks compatibility.
TEST(GptSampler, ShufflePermutationIsPinned) {
  ScratchDir dir;
  IndexedDataset dataset(write_counting_dataset(dir, 11));  // 10 samples, seq_length 1
  const GptSampler sampler(dataset, 1, SampleRange{0, 10}, true, 1234, 60000);
  EXPECT_EQ(epoch_order(sampler, 0, 1), (std::vector<int64_t>{3, 4, 8, 6, 5, 7, 9, 1, 0, 2}));
  EXPECT_EQ(epoch_order(sampler, 1, 1), (std::vector<int64_t>{9, 3, 4, 5, 8, 6, 0, 2, 1, 7}));
}

// Fisher-Yates draws every permutation equally often: each sample lands at each
// position with probability 1/n (an off-by-one such as Sattolo's never fixes a point).
TEST(GptSampler, ShuffleIsUniform) {
  ScratchDir dir;
  IndexedDataset dataset(write_counting_dataset(dir, 6));  // 5 samples, seq_length 1
  const GptSampler sampler(dataset, 1, SampleRange{0, 5}, true, 7, 60000);
  constexpr int kEpochs = 5000;
  std::vector<int> counts(25, 0);  // (position, sample)
  for (int64_t epoch = 0; epoch < kEpochs; ++epoch) {
    const std::vector<int64_t> order = epoch_order(sampler, epoch, 1);
    for (int position = 0; position < 5; ++position) ++counts[position * 5 + order[position]];
  }
  for (int cell = 0; cell < 25; ++cell) {
    // Expected 1000, standard deviation 28; 6 sigma.
    EXPECT_NEAR(counts[cell], kEpochs / 5, 170)
        << "position " << cell / 5 << " sample " << cell % 5;
  }
}

TEST(GptSampler, TokenOutsideVocabularyNamesDatasetPositionValue) {
  ScratchDir dir;
  const std::string prefix = dir.path("vocab");
  {
    IndexedDatasetWriter writer(prefix, TokenDType::uint16);
    std::vector<int32_t> tokens(41, 5);
    tokens[17] = 300;
    writer.add_document(tokens);
    writer.finish();
  }
  IndexedDataset dataset(prefix);
  const GptSampler sampler(dataset, 4, SampleRange{0, 10}, false, 1, 300);
  std::vector<int32_t> out(5);
  sampler.sample(3, out.data());  // tokens 12..16 are fine
  const std::string message = input_error_of([&] { sampler.sample(4, out.data()); });
  EXPECT_NE(message.find(prefix), std::string::npos) << message;
  EXPECT_NE(message.find("position 17"), std::string::npos) << message;
  EXPECT_NE(message.find("value 300"), std::string::npos) << message;
  EXPECT_NE(message.find("vocab_size = 300"), std::string::npos) << message;
  // With a vocabulary that holds 300 the same sample is fine.
  const GptSampler wide(dataset, 4, SampleRange{0, 10}, false, 1, 301);
  wide.sample(4, out.data());
  EXPECT_EQ(out[1], 300);
}

}  // namespace
}  // namespace trainer
