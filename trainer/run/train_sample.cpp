// train.sample_interval: every N steps the whole model is gathered to world rank 0 (as the export
// does, so every parallel layout samples the same model) and continues train.sample_prompt there
// with the key/value-cache decoder; the sample goes to the log and to events.jsonl.
#include <unistd.h>

#include "runtime/error.h"
#include "trainer/generate/dataset_tokenizer.h"
#include "trainer/generate/sample.h"
#include "trainer/run/train.h"
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

void Trainer::prepare_sampling() {
  const TrainConfig& t = config_.train;
  if (t.sample_interval == 0 || groups_.world_rank != 0) return;
  // The whole model on rank 0's host: gathered from the ranks, or copied from the device.
  if (groups_.world_size() > 1 || on_device_) {
    const int64_t pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page_bytes > 0) {
      check_sampling_fits(
          model::GptParams::count(whole_model_config()) * static_cast<int64_t>(sizeof(float)),
          pages * page_bytes);
    }
  }
  // A dataset without <prefix>.json (any Megatron indexed dataset) has no known tokenizer.
  if (const auto spec = data_tokenizer_spec(config_.data))
    sample_tokenizer_ = tokenizer::load_tokenizer(*spec);
  const bool has_eod = sample_tokenizer_ && sample_tokenizer_->identity().eod_id;
  if (t.sample_prompt.empty() && !has_eod) {
    sample_prompt_ids_ = {0};  // no document start to give (a synthetic corpus): id 0 as the prompt
  } else if (!sample_tokenizer_) {
    throw runtime::ConfigError("train.sample_prompt",
                               "needs a tokenizer, and no dataset of the run has one in a .json "
                               "beside it; leave it empty");
  } else {
    try {
      sample_prompt_ids_ = prompt_ids(t.sample_prompt, *sample_tokenizer_, config_.model);
    } catch (const runtime::InputError& error) {
      throw runtime::ConfigError("train.sample_prompt", error.what());
    }
  }
  const auto length = static_cast<int64_t>(sample_prompt_ids_.size()) + t.sample_tokens;
  if (config_.model.learned_positions() && length > config_.model.positions()) {
    throw runtime::ConfigError(
        "train.sample_tokens",
        TRAINER_STR(t.sample_tokens << " after the prompt's " << sample_prompt_ids_.size()
                                    << " tokens exceed the " << config_.model.positions()
                                    << " learned positions"));
  }
}

void Trainer::write_sample() {
  std::unique_ptr<model::GptParams> gathered;
  if (groups_.world_size() > 1) gathered = gather(host_params());  // collective
  if (groups_.world_rank != 0) return;
  const model::GptParams& whole = gathered ? *gathered : host_params();
  const model::GptConfig config = gathered ? whole_model_config() : config_.model;
  SamplingOptions sampling;
  sampling.max_new_tokens = config_.train.sample_tokens;
  sampling.seed = config_.train.seed;
  if (sample_tokenizer_) sampling.stop_id = sample_tokenizer_->identity().eod_id;
  const Sample sample =
      generate_sample(whole, config, sample_prompt_ids_, sampling, sample_tokenizer_.get());
  std::vector<int64_t> generated(sample.generated.begin(), sample.generated.end());
  // Without a prompt the text is the generated tokens' alone, not the eod (or id 0) before them.
  const std::string text = sample_tokenizer_ && config_.train.sample_prompt.empty()
                               ? tokenizer::valid_utf8(sample_tokenizer_->decode(sample.generated))
                               : sample.text;
  Event event = Event("sample", step_).with("prompt", config_.train.sample_prompt);
  if (sample_tokenizer_) event.with("text", text);
  record_event(event.with("tokens", generated));
  if (groups_.is_logging_rank()) {
    log_ << "sample: step " << step_ << ": ";
    if (sample_tokenizer_) {
      log_ << text << "\n";
    } else {
      for (const int32_t id : sample.generated) log_ << id << " ";
      log_ << "(token ids: the dataset has no tokenizer)\n";
    }
    log_.flush();
  }
}

}  // namespace trainer
