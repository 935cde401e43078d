#include "trainer/generate/sample.h"

#include "model/decoder.h"
#include "runtime/error.h"

namespace trainer {

std::vector<int32_t> prompt_ids(const std::string& prompt, const tokenizer::Tokenizer& tokenizer,
                                const model::GptConfig& config) {
  std::vector<int32_t> ids;
  if (prompt.empty()) {
    if (!tokenizer.identity().eod_id) {
      throw runtime::InputError(
          "generate: the tokenizer has no eod id to start a document; give --prompt");
    }
    ids.push_back(*tokenizer.identity().eod_id);
  } else {
    tokenizer.new_session()->encode(prompt, &ids);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= config.vocab_size) {
      throw runtime::InputError(
          TRAINER_STR("generate: prompt token "
                      << i << " is id " << ids[i] << ", not below the model's "
                      << "vocab_size " << config.vocab_size << " (the " << tokenizer.identity().kind
                      << " tokenizer does not fit this model)"));
    }
  }
  return ids;
}

Sample generate_sample(const model::GptParams& params, const model::GptConfig& config,
                       const std::vector<int32_t>& prompt, const SamplingOptions& sampling,
                       const tokenizer::Tokenizer* tokenizer, runtime::Allocator* device) {
  runtime::CpuAllocator host;
  model::Decoder decoder(params, config, device != nullptr ? *device : host);
  Sample sample;
  sample.prompt = prompt;
  sample.generated = generate_tokens(decoder, prompt, sampling);
  if (tokenizer != nullptr) {
    std::vector<int32_t> ids = prompt;
    ids.insert(ids.end(), sample.generated.begin(), sample.generated.end());
    if (sampling.stop_id && !sample.generated.empty() &&
        sample.generated.back() == *sampling.stop_id)
      ids.pop_back();
    sample.text = tokenizer::valid_utf8(tokenizer->decode(ids));
  }
  return sample;
}

}  // namespace trainer
