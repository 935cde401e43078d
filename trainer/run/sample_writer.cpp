// The training run's samples: the prompt and the tokenizer checked when the run starts, then a
// sample of the gathered model every train.sample_interval steps.
#include "trainer/run/sample_writer.h"

#include <unistd.h>

#include <ostream>

#include "runtime/error.h"
#include "trainer/generate/dataset_tokenizer.h"
#include "trainer/generate/sample.h"
#include "trainer/util/format_bytes.h"

namespace trainer {

void check_sampling_fits(int64_t model_bytes, int64_t host_bytes) {
  if (2 * model_bytes <= host_bytes) return;
  throw runtime::ConfigError(
      "train.sample_interval",
      "sampling holds the whole model in f32 (" + format_bytes(model_bytes) +
          ") on world rank 0, over half of its host's " + format_bytes(host_bytes) +
          " of memory; set train.sample_interval: 0 and sample the export with `trainer "
          "generate`");
}

SampleWriter::SampleWriter(const Config& config, int64_t world_rank,
                           std::optional<int64_t> host_copy_bytes)
    : config_(config) {
  const TrainConfig& t = config_.train;
  if (t.sample_interval == 0 || world_rank != 0) return;
  if (host_copy_bytes) {
    const int64_t pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page_bytes > 0) check_sampling_fits(*host_copy_bytes, pages * page_bytes);
  }
  // A dataset without <prefix>.json (any Megatron indexed dataset) has no known tokenizer.
  if (const auto spec = data_tokenizer_spec(config_.data))
    tokenizer_ = tokenizer::load_tokenizer(*spec);
  const bool has_eod = tokenizer_ && tokenizer_->identity().eod_id;
  if (t.sample_prompt.empty() && !has_eod) {
    prompt_ids_ = {0};  // no document start to give (a synthetic corpus): id 0 as the prompt
  } else if (!tokenizer_) {
    throw runtime::ConfigError("train.sample_prompt",
                               "needs a tokenizer, and no dataset of the run has one in a .json "
                               "beside it; leave it empty");
  } else {
    try {
      prompt_ids_ = prompt_ids(t.sample_prompt, *tokenizer_, config_.model);
    } catch (const runtime::InputError& error) {
      throw runtime::ConfigError("train.sample_prompt", error.what());
    }
  }
  const auto length = static_cast<int64_t>(prompt_ids_.size()) + t.sample_tokens;
  if (config_.model.learned_positions() && length > config_.model.positions()) {
    throw runtime::ConfigError(
        "train.sample_tokens",
        TRAINER_STR(t.sample_tokens << " after the prompt's " << prompt_ids_.size()
                                    << " tokens exceed the " << config_.model.positions()
                                    << " learned positions"));
  }
}

Event SampleWriter::write(const model::GptParams& whole, const model::GptConfig& model,
                          int64_t step, std::ostream& log) const {
  SamplingOptions sampling;
  sampling.max_new_tokens = config_.train.sample_tokens;
  sampling.seed = config_.train.seed;
  if (tokenizer_) sampling.stop_id = tokenizer_->identity().eod_id;
  const Sample sample = generate_sample(whole, model, prompt_ids_, sampling, tokenizer_.get());
  std::vector<int64_t> generated(sample.generated.begin(), sample.generated.end());
  // Without a prompt the text is the generated tokens' alone, not the eod (or id 0) before them.
  const std::string text = tokenizer_ && config_.train.sample_prompt.empty()
                               ? tokenizer::valid_utf8(tokenizer_->decode(sample.generated))
                               : sample.text;
  log << "sample: step " << step << ": ";
  if (tokenizer_) {
    log << text << "\n";
  } else {
    for (const int32_t id : sample.generated) log << id << " ";
    log << "(token ids: the dataset has no tokenizer)\n";
  }
  log.flush();
  Event event = Event("sample", step).with("prompt", config_.train.sample_prompt);
  if (tokenizer_) event.with("text", text);
  return event.with("tokens", generated);
}

}  // namespace trainer
