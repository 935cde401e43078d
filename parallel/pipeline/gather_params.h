// Assembles the whole model on world rank 0 from the ranks that hold it (dp
// rank 0 of every (tp, pp) position), for the export and for tests that compare
// layouts: all at once, or one parameter at a time (ParamGather), so that rank 0
// need not hold the whole model. Works for parameters and gradients alike (same
// named layout).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/gpt_params.h"
#include "parallel/core/process_groups.h"

namespace parallel {

// The whole model's parameters gathered to world rank 0 one at a time. Each is
// sent by the ranks that hold it at dp rank 0 and context rank 0: a split one by
// every tp rank (its slice), a replicated one by tp rank 0, the tied word
// embeddings by the first stage.
class ParamGather {
 public:
  // Collective over the world: every rank tells rank 0 which parts it holds.
  // `local` (host f32, this rank's parameters or gradients) must outlive this;
  // `config` is the whole model's, its word embeddings padded as the run's.
  ParamGather(ProcessGroups& groups, const model::GptConfig& config, const model::GptParams& local);

  // Collective over the world, every rank calling it for the same parameters in
  // the same order: on rank 0, the whole parameter `index` (of GptParams::named
  // of the whole model, in its global shape) written to `out`, of numel(index)
  // values; elsewhere this rank's part of it sent to rank 0 (`out` unused).
  void gather(int64_t index, std::span<float> out);

  int64_t count() const { return static_cast<int64_t>(whole_.named().size()); }
  int64_t numel(int64_t index) const;

 private:
  struct Part {
    int source;            // world rank
    int64_t shard_offset;  // along the split dimension
  };

  ProcessGroups& groups_;
  model::WholeModelLayout whole_;
  // This rank's part of each whole-model parameter, or null where it sends none.
  std::vector<const model::NamedParam*> owned_;
  std::vector<std::vector<Part>> parts_;  // rank 0: each parameter's senders, in order
};

// Collective over the world. `full` (rank 0 only; null elsewhere) holds the
// whole model (GptParams::allocate of `config`), its word embeddings padded as
// the run's.
void gather_to_rank0(ProcessGroups& groups, const model::GptConfig& config,
                     const model::GptParams& local, const model::GptParams* full);

}  // namespace parallel
