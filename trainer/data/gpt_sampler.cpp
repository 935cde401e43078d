// Train/validation split of an indexed dataset into GPT samples, and the sampler that
// walks a split in order or through a seeded per-epoch permutation. Rules: the
// permutation is a pure function of (seed, epoch, count), identical on every machine.
#include "trainer/data/gpt_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "runtime/error.h"
#include "runtime/philox.h"
#include "trainer/data/splitmix_stream.h"

namespace trainer {
namespace {

constexpr uint64_t kShuffleDomain =
    0x53485546464C4531ull;  // "SHUFFLE1": separates from other seed uses

void build_permutation(int64_t count, uint64_t seed, int64_t epoch, std::vector<int64_t>* out) {
  out->resize(static_cast<size_t>(count));
  std::iota(out->begin(), out->end(), int64_t{0});
  const uint64_t key = runtime::splitmix64(runtime::splitmix64(seed ^ kShuffleDomain) ^
                                           static_cast<uint64_t>(epoch));
  SplitMix64Stream stream(key);
  for (int64_t i = count - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(stream.below(static_cast<uint64_t>(i) + 1));
    std::swap((*out)[i], (*out)[j]);
  }
}

int64_t samples_in(const IndexedDataset& dataset, int64_t seq_length) {
  return dataset.num_tokens() >= 1 ? (dataset.num_tokens() - 1) / seq_length : 0;
}

}  // namespace

std::vector<SampleRange> split_samples(const IndexedDataset& dataset, int64_t seq_length,
                                       const std::vector<double>& weights) {
  if (seq_length < 1) {
    throw runtime::InputError(TRAINER_STR("dataset " << dataset.prefix() << ": seq_length "
                                                     << seq_length << " must be >= 1"));
  }
  double total = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    if (!std::isfinite(weights[k]) || weights[k] < 0) {
      throw runtime::InputError(TRAINER_STR("dataset " << dataset.prefix() << ": split weight[" << k
                                                       << "] = " << weights[k]
                                                       << " must be finite and >= 0"));
    }
    total += weights[k];
  }
  if (weights.empty() || !(total > 0)) {
    throw runtime::InputError(TRAINER_STR("dataset " << dataset.prefix() << ": split weights "
                                                     << "must be non-empty with a positive sum"));
  }
  const int64_t num_samples = samples_in(dataset, seq_length);
  std::vector<SampleRange> ranges(weights.size());
  double cumulative = 0;
  int64_t previous = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    cumulative += weights[k];
    int64_t boundary = k + 1 == weights.size()
                           ? num_samples
                           : static_cast<int64_t>(
                                 std::floor(static_cast<double>(num_samples) * cumulative / total));
    boundary = std::min(std::max(boundary, previous), num_samples);
    ranges[k] = SampleRange{previous, boundary - previous};
    if (weights[k] > 0 && ranges[k].count < 1) {
      throw runtime::InputError(TRAINER_STR(
          "dataset " << dataset.prefix() << " has " << dataset.num_tokens() << " tokens = "
                     << num_samples << " samples of seq_length " << seq_length << " + 1; split "
                     << "range " << k << " (weight " << weights[k] << " of " << total
                     << ") gets no sample"));
    }
    previous = boundary;
  }
  return ranges;
}

GptSampler::GptSampler(const IndexedDataset& dataset, int64_t seq_length, SampleRange range,
                       bool shuffle, uint64_t seed, int64_t vocab_size)
    : dataset_(dataset),
      seq_length_(seq_length),
      range_(range),
      shuffle_(shuffle),
      seed_(seed),
      vocab_size_(vocab_size) {
  TRAINER_ASSERT(seq_length_ >= 1 && vocab_size_ >= 1,
                 "seq_length " << seq_length_ << ", vocab_size " << vocab_size_);
  TRAINER_ASSERT(range_.first >= 0 && range_.count >= 0 &&
                     range_.first + range_.count <= samples_in(dataset_, seq_length_),
                 "range [" << range_.first << ", +" << range_.count << ") outside the "
                           << samples_in(dataset_, seq_length_) << " samples of "
                           << dataset_.prefix());
}

void GptSampler::sample(int64_t index, int32_t* out) const {
  TRAINER_ASSERT(index >= 0 && range_.count > 0,
                 "sample " << index << " of a range of " << range_.count << " samples");
  const int64_t epoch = index / range_.count;
  const int64_t position = index % range_.count;
  int64_t offset = position;
  if (shuffle_) {
    // The cache makes sample() cheap per call but not thread-safe.
    if (cached_epoch_ != epoch) {
      build_permutation(range_.count, seed_, epoch, &permutation_);
      cached_epoch_ = epoch;
    }
    offset = permutation_[static_cast<size_t>(position)];
  }
  const int64_t sample_id = range_.first + offset;
  const int64_t begin = sample_id * seq_length_;
  dataset_.read_tokens(begin, seq_length_ + 1, out);
  for (int64_t i = 0; i <= seq_length_; ++i) {
    if (out[i] < 0 || out[i] >= vocab_size_) {
      throw runtime::InputError(
          TRAINER_STR("dataset " << dataset_.prefix() << ": token at stream "
                                 << "position " << begin + i << " has value " << out[i]
                                 << ", outside [0, vocab_size = " << vocab_size_ << ")"));
    }
  }
}

}  // namespace trainer
