// Megatron's BlendedDataset order (docs/data.md, "Blended datasets"): sample i comes from the
// dataset furthest below weight * (i + 1) (ties to the lowest index) and is its next sample.
// Rules: a pure function of i and the weights, so every rank, layout and resume draws alike.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/data/gpt_sampler.h"

namespace trainer {

// Where blend sample i comes from.
struct BlendDraw {
  int64_t dataset = 0;  // position in the blend
  int64_t index = 0;    // the dataset's own sample index: the samples it gave before this one
};

class BlendSchedule {
 public:
  // weights: one per dataset, each finite and > 0 (asserted; the config checks them first).
  explicit BlendSchedule(const std::vector<double>& weights);

  BlendDraw draw(int64_t sample) const;
  int64_t num_datasets() const { return static_cast<int64_t>(weights_.size()); }
  const std::vector<double>& weights() const { return weights_; }  // normalised: sum 1

 private:
  // The dataset of blend sample `sample`, given each dataset's count among [0, sample).
  size_t choose(int64_t sample, const std::vector<int64_t>& counts) const;
  // Makes the cursor stand at `sample` (counts of [0, sample)).
  void seek(int64_t sample) const;
  // Appends rows to the table until it holds row `row`.
  void extend_table(int64_t row) const;

  std::vector<double> weights_;
  // Note [Blend counts table]: row r holds every dataset's count among samples
  // [0, r * kBlendStride), flattened; the cursor walks forward from the last row at or below a
  // sample, so reading samples in order costs O(datasets) each and any jump at most a stride.
  mutable std::vector<int64_t> table_;
  mutable int64_t cursor_ = 0;
  mutable std::vector<int64_t> cursor_counts_;
};

// Samples per row of the blend's counts table.
inline constexpr int64_t kBlendStride = 1024;

// The blend of several samplers: sample i is draw(i).index of sampler draw(i).dataset.
class BlendedSampler : public SampleSource {
 public:
  // datasets: borrowed, one per weight, outliving the sampler.
  BlendedSampler(std::vector<const SampleSource*> datasets, const std::vector<double>& weights);
  void sample(int64_t index, int32_t* out) const override;
  BlendDraw draw(int64_t index) const { return schedule_.draw(index); }
  const BlendSchedule& schedule() const { return schedule_; }

 private:
  std::vector<const SampleSource*> datasets_;
  BlendSchedule schedule_;
};

// The shuffle seed of blend dataset k: seed + k * 0x9E3779B97F4A7C15 (mod 2^64). Dataset 0
// keeps the run's seed, so a blend of one shuffles as the same data.path does.
uint64_t blend_dataset_seed(uint64_t seed, int64_t dataset);

}  // namespace trainer
