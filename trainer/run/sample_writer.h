// train.sample_interval: every N steps the whole model, gathered to world rank 0 (as the export
// does, so every parallel layout samples the same model), continues train.sample_prompt there
// with the key/value-cache decoder; the sample goes to the log and to events.jsonl.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <vector>

#include "model/gpt_params.h"
#include "trainer/config/config.h"
#include "trainer/observe/event_ledger.h"
#include "trainer/tokenizer/tokenizer.h"

namespace trainer {

// train.sample_interval's host memory (ConfigError naming train.sample_interval, the model's
// bytes and the host's, otherwise nothing): sampling holds `model_bytes` (the whole model in f32,
// gathered onto world rank 0 or copied from its device) on a host of `host_bytes`, and is refused
// where that is over half of it, rather than running out of memory mid-run.
void check_sampling_fits(int64_t model_bytes, int64_t host_bytes);

class SampleWriter {
 public:
  // On world rank 0 with train.sample_interval set: the dataset's tokenizer and the prompt's ids
  // (ConfigError naming train.sample_prompt or train.sample_tokens when they do not fit the
  // model), and the host's memory checked for `host_copy_bytes`, the whole model's copy there
  // (none: sampling reads the weights where they are). Nothing elsewhere.
  SampleWriter(const Config& config, int64_t world_rank, std::optional<int64_t> host_copy_bytes);

  // World rank 0: a sample of `whole` (the whole model, of `model`) after `step`, its text on
  // `log`; returns its "sample" event.
  Event write(const model::GptParams& whole, const model::GptConfig& model, int64_t step,
              std::ostream& log) const;

 private:
  const Config& config_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;  // none: no text
  std::vector<int32_t> prompt_ids_;
};

}  // namespace trainer
