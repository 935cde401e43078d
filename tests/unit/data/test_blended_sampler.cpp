// Blended datasets: Megatron's order (every prefix within one sample of the weights, ties to the
// lowest index), random access equal to a walk from 0 (resumes, skips, dp ranks), and the
// blended sampler reading each dataset's own split in its own seeded order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "data_test_util.h"
#include "trainer/data/blended_sampler.h"

namespace trainer {
namespace {

using testing::ScratchDir;

// The dataset of each of the first n samples, drawn in order from a fresh schedule.
std::vector<int64_t> datasets_in_order(const std::vector<double>& weights, int64_t n) {
  const BlendSchedule schedule(weights);
  std::vector<int64_t> datasets;
  for (int64_t i = 0; i < n; ++i) datasets.push_back(schedule.draw(i).dataset);
  return datasets;
}

// The largest |count_k(n) - weight_k * n| over every prefix n in [1, samples] and dataset k,
// checking on the way that each dataset's own indices run 0, 1, 2, ... without a gap.
double worst_prefix_deviation(const std::vector<double>& weights, int64_t samples) {
  const BlendSchedule schedule(weights);
  std::vector<int64_t> counts(weights.size(), 0);
  double worst = 0;
  for (int64_t i = 0; i < samples; ++i) {
    const BlendDraw draw = schedule.draw(i);
    EXPECT_EQ(draw.index, counts[static_cast<size_t>(draw.dataset)]) << "sample " << i;
    ++counts[static_cast<size_t>(draw.dataset)];
    for (size_t k = 0; k < weights.size(); ++k) {
      const double expected = schedule.weights()[k] * static_cast<double>(i + 1);
      worst = std::max(worst, std::abs(static_cast<double>(counts[k]) - expected));
    }
  }
  return worst;
}

TEST(BlendSchedule, QuarterAndThreeQuartersStayWithinOneSampleAtEveryPrefix) {
  // Every prefix of samples, so every step prefix of any global batch size too.
  const double worst = worst_prefix_deviation({0.25, 0.75}, 200'000);
  std::printf("[ blend  ] weights 0.25/0.75, 200000 samples: largest |count - weight x n| %.4f\n",
              worst);
  EXPECT_LT(worst, 1.0);
  // Two datasets: the largest-deficit rule keeps every prefix within half a sample (a target of
  // weight * i instead of weight * (i + 1) reaches 0.75 here).
  EXPECT_LE(worst, 0.5);
}

TEST(BlendSchedule, OtherBlendsStayWithinOneSampleToo) {
  for (const std::vector<double>& weights :
       std::vector<std::vector<double>>{{0.7, 0.3},
                                        {1, 1},
                                        {1, 2, 3},
                                        {5, 1, 1, 1},
                                        {0.01, 0.99},
                                        {1.0 / 3, 1.0 / 3, 1.0 / 3},
                                        {0.45, 0.3, 0.15, 0.1}}) {
    const double worst = worst_prefix_deviation(weights, 50'000);
    EXPECT_LT(worst, 1.0) << weights.size() << " datasets, first weight " << weights[0];
  }
}

TEST(BlendSchedule, FollowsTheLargestDeficitWithTiesToTheLowestIndex) {
  // 0.25/0.75: sample 0 goes to 1 (deficits 0.25, 0.75); sample 1 ties (0.5, 0.5) and goes to
  // 0; samples 2 and 3 go to 1; then the pattern repeats.
  EXPECT_EQ(datasets_in_order({0.25, 0.75}, 12),
            (std::vector<int64_t>{1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1}));
  // Equal weights alternate from dataset 0; weights need not sum to 1.
  EXPECT_EQ(datasets_in_order({3, 3}, 6), (std::vector<int64_t>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(datasets_in_order({2, 1, 1}, 8), (std::vector<int64_t>{0, 1, 2, 0, 0, 1, 2, 0}));
}

TEST(BlendSchedule, OneDatasetIsItsOwnOrder) {
  const BlendSchedule schedule({4.0});
  for (const int64_t i : {int64_t{0}, int64_t{7}, int64_t{123456789}}) {
    EXPECT_EQ(schedule.draw(i).dataset, 0);
    EXPECT_EQ(schedule.draw(i).index, i);
  }
}

TEST(BlendSchedule, AnyAccessOrderGivesTheWalkFromZero) {
  const std::vector<double> weights = {0.2, 0.5, 0.3};
  constexpr int64_t kSamples = 5 * kBlendStride + 17;
  const BlendSchedule walked(weights);
  std::vector<BlendDraw> expected;
  for (int64_t i = 0; i < kSamples; ++i) expected.push_back(walked.draw(i));
  // A fresh schedule read as resumes, skipped batches and dp ranks read: jumps forward past
  // several strides, back, and around the stride boundaries.
  std::vector<int64_t> order(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) order[static_cast<size_t>(i)] = i;
  std::mt19937_64 random(7);
  std::shuffle(order.begin(), order.end(), random);
  order.insert(order.begin(), {kSamples - 1, 0, kBlendStride, kBlendStride - 1, 3 * kBlendStride});
  const BlendSchedule jumped(weights);
  for (const int64_t i : order) {
    const BlendDraw draw = jumped.draw(i);
    ASSERT_EQ(draw.dataset, expected[static_cast<size_t>(i)].dataset) << "sample " << i;
    ASSERT_EQ(draw.index, expected[static_cast<size_t>(i)].index) << "sample " << i;
  }
}

TEST(BlendSchedule, ALateFirstDrawMatchesTheCountsOfTheWeights) {
  // A resume at a late step reads its first sample far from 0.
  const BlendSchedule schedule({0.25, 0.75});
  const int64_t late = 4'000'000;
  const BlendDraw draw = schedule.draw(late);
  const double share = draw.dataset == 0 ? 0.25 : 0.75;
  EXPECT_LT(std::abs(static_cast<double>(draw.index) - share * static_cast<double>(late)), 1.0);
}

TEST(BlendDatasetSeed, DatasetZeroKeepsTheRunSeedAndTheOthersDiffer) {
  EXPECT_EQ(blend_dataset_seed(1234, 0), 1234u);
  EXPECT_NE(blend_dataset_seed(1234, 1), 1234u);
  EXPECT_NE(blend_dataset_seed(1234, 1), blend_dataset_seed(1234, 2));
  EXPECT_NE(blend_dataset_seed(1234, 1), blend_dataset_seed(1235, 1));
}

// A dataset whose tokens are base, base + 1, ...: a sample's first token tells its dataset and
// its position in that dataset's stream.
std::string write_ramp(const ScratchDir& dir, const std::string& name, int32_t base,
                       int64_t tokens) {
  const std::string prefix = dir.path(name);
  IndexedDatasetWriter writer(prefix, TokenDType::int32);
  std::vector<int32_t> document;
  for (int64_t p = 0; p < tokens; ++p) document.push_back(base + static_cast<int32_t>(p));
  writer.add_document(document);
  writer.finish();
  return prefix;
}

TEST(BlendedSampler, ReadsEachDatasetsOwnSplitInItsOwnSeededOrder) {
  ScratchDir dir;
  constexpr int64_t kSeq = 4;
  constexpr int32_t kBaseB = 100'000;
  const IndexedDataset a(write_ramp(dir, "a", 0, 401));       // 100 samples
  const IndexedDataset b(write_ramp(dir, "b", kBaseB, 801));  // 200 samples
  const std::vector<SampleRange> ranges_a = split_samples(a, kSeq, {90, 10});
  const std::vector<SampleRange> ranges_b = split_samples(b, kSeq, {90, 10});
  const uint64_t seed = 99;
  const GptSampler train_a(a, kSeq, ranges_a[0], true, blend_dataset_seed(seed, 0), 1 << 20);
  const GptSampler train_b(b, kSeq, ranges_b[0], true, blend_dataset_seed(seed, 1), 1 << 20);
  const BlendedSampler blend({&train_a, &train_b}, {0.25, 0.75});
  std::vector<int32_t> got(kSeq + 1), want(kSeq + 1);
  int64_t from_a = 0, from_b = 0;
  for (int64_t i = 0; i < 1000; ++i) {  // several epochs of each dataset's train range
    blend.sample(i, got.data());
    const BlendDraw draw = blend.draw(i);
    const GptSampler& own = draw.dataset == 0 ? train_a : train_b;
    own.sample(draw.index, want.data());
    ASSERT_EQ(got, want) << "sample " << i;
    const bool is_b = got[0] >= kBaseB;
    EXPECT_EQ(is_b, draw.dataset == 1);
    // Never a validation sample: a's train range is its first 90 samples, b's its first 180.
    EXPECT_LT((got[0] - (is_b ? kBaseB : 0)) / kSeq, is_b ? 180 : 90);
    ++(is_b ? from_b : from_a);
  }
  EXPECT_EQ(from_a, 250);
  EXPECT_EQ(from_b, 750);
  // Each dataset's order is its own shuffle: b's first epoch is a permutation of its range
  // that differs from the identity and from a's.
  std::vector<int32_t> first(kSeq + 1);
  std::vector<int64_t> order_a, order_b;
  for (int64_t j = 0; j < 90; ++j) {
    train_a.sample(j, first.data());
    order_a.push_back(first[0] / kSeq);
    train_b.sample(j, first.data());
    order_b.push_back((first[0] - kBaseB) / kSeq);
  }
  std::vector<int64_t> in_order(90);
  for (int64_t j = 0; j < 90; ++j) in_order[static_cast<size_t>(j)] = j;
  EXPECT_NE(order_a, in_order);
  EXPECT_NE(order_b, order_a);
}

}  // namespace
}  // namespace trainer
