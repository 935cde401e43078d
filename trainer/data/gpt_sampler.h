// GPT samples from an indexed dataset (docs/data.md, "Samples"): the token stream is
// cut into samples of seq_length + 1 tokens, sample i = tokens[i*S, i*S + S + 1)
// (inputs, then targets shifted by one). The samples are split into train and
// validation ranges by weight; validation is always read in order.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/data/indexed_dataset.h"

namespace trainer {

struct SampleRange {
  int64_t first = 0;  // first sample index of the range in the whole dataset
  int64_t count = 0;
};

// Splits the dataset's num_samples = (num_tokens - 1) / seq_length samples into
// consecutive ranges by the weights (e.g. {98, 2}); range k gets
// floor(num_samples * cumulative_weight_k / total) - previous boundary.
// Throws InputError when the dataset has fewer than one sample for a range
// with a positive weight (the message names the dataset, its tokens and seq_length).
std::vector<SampleRange> split_samples(const IndexedDataset& dataset, int64_t seq_length,
                                       const std::vector<double>& weights);

// What training and validation read samples from: one dataset's range (GptSampler) or a blend
// of several (BlendedSampler, blended_sampler.h).
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Writes the seq_length + 1 tokens of the index-th sample drawn, where index counts samples
  // from the start of training. Global batch k holds indices [k*G, (k+1)*G).
  virtual void sample(int64_t index, int32_t* out) const = 0;
};

class GptSampler : public SampleSource {
 public:
  // shuffle: samples are taken through a permutation of the range seeded by
  // (seed, epoch), a new one each pass over the range; otherwise in order.
  // vocab_size: every token read is checked to be < vocab_size (InputError
  // naming the dataset, token position and value otherwise).
  GptSampler(const IndexedDataset& dataset, int64_t seq_length, SampleRange range, bool shuffle,
             uint64_t seed, int64_t vocab_size);

  int64_t num_samples() const { return range_.count; }

  // SampleSource::sample; index >= num_samples wraps into the next epoch.
  void sample(int64_t index, int32_t* out) const override;

 private:
  const IndexedDataset& dataset_;
  int64_t seq_length_;
  SampleRange range_;
  bool shuffle_;
  uint64_t seed_;
  int64_t vocab_size_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> permutation_;
};

}  // namespace trainer
