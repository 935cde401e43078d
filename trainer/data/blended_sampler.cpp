// The blend's order (BlendSchedule) and the sampler that reads it. Rules: the choice of a sample
// depends only on its index and integer counts, so the table, the cursor and a fresh walk from 0
// always agree; weights are normalised once, in double.
#include "trainer/data/blended_sampler.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

#include "runtime/error.h"

namespace trainer {

BlendSchedule::BlendSchedule(const std::vector<double>& weights) {
  TRAINER_ASSERT(!weights.empty(), "a blend of no dataset");
  double total = 0;
  for (const double weight : weights) {
    TRAINER_ASSERT(weight > 0 && std::isfinite(weight), "blend weight " << weight);
    total += weight;
  }
  for (const double weight : weights) weights_.push_back(weight / total);
  table_.assign(weights_.size(), 0);  // row 0: nothing drawn yet
  cursor_counts_.assign(weights_.size(), 0);
}

size_t BlendSchedule::choose(int64_t sample, const std::vector<int64_t>& counts) const {
  const double drawn = static_cast<double>(sample + 1);  // samples [0, sample] once this one is
  size_t chosen = 0;
  double largest_deficit = -std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < weights_.size(); ++k) {
    const double deficit = weights_[k] * drawn - static_cast<double>(counts[k]);
    if (deficit > largest_deficit) {  // strictly: a tie goes to the lowest index
      largest_deficit = deficit;
      chosen = k;
    }
  }
  return chosen;
}

void BlendSchedule::extend_table(int64_t row) const {
  const size_t width = weights_.size();
  std::vector<int64_t> counts(width);
  for (auto rows = static_cast<int64_t>(table_.size() / width); rows <= row; ++rows) {
    const auto last = table_.end() - static_cast<std::ptrdiff_t>(width);
    counts.assign(last, table_.end());
    for (int64_t s = (rows - 1) * kBlendStride; s < rows * kBlendStride; ++s)
      ++counts[choose(s, counts)];
    table_.insert(table_.end(), counts.begin(), counts.end());
  }
}

void BlendSchedule::seek(int64_t sample) const {
  if (sample < cursor_ || sample - cursor_ >= kBlendStride) {
    const int64_t row = sample / kBlendStride;
    extend_table(row);
    const auto first = table_.begin() + static_cast<std::ptrdiff_t>(row) *
                                            static_cast<std::ptrdiff_t>(weights_.size());
    cursor_counts_.assign(first, first + static_cast<std::ptrdiff_t>(weights_.size()));
    cursor_ = row * kBlendStride;
  }
  for (; cursor_ < sample; ++cursor_) ++cursor_counts_[choose(cursor_, cursor_counts_)];
}

BlendDraw BlendSchedule::draw(int64_t sample) const {
  TRAINER_ASSERT(sample >= 0, "blend sample " << sample);
  if (weights_.size() == 1) return {.dataset = 0, .index = sample};
  seek(sample);
  const size_t dataset = choose(sample, cursor_counts_);
  return {.dataset = static_cast<int64_t>(dataset), .index = cursor_counts_[dataset]};
}

BlendedSampler::BlendedSampler(std::vector<const SampleSource*> datasets,
                               const std::vector<double>& weights)
    : datasets_(std::move(datasets)), schedule_(weights) {
  TRAINER_ASSERT(datasets_.size() == weights.size(),
                 datasets_.size() << " datasets, " << weights.size() << " weights");
}

void BlendedSampler::sample(int64_t index, int32_t* out) const {
  const BlendDraw draw = schedule_.draw(index);
  datasets_[static_cast<size_t>(draw.dataset)]->sample(draw.index, out);
}

uint64_t blend_dataset_seed(uint64_t seed, int64_t dataset) {
  return seed + static_cast<uint64_t>(dataset) * 0x9E3779B97F4A7C15ull;
}

}  // namespace trainer
