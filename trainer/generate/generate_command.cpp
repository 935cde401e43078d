// `trainer generate`: options, the model (export or checkpoint), the tokenizer (the dataset's or
// the flags'), then prompt -> Decoder -> sampled tokens -> text on stdout.
#include "trainer/generate/generate_command.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <ostream>

#include "model/decoder.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "trainer/data/prepare_data_options.h"
#include "trainer/generate/dataset_tokenizer.h"
#include "trainer/generate/model_source.h"

namespace trainer {
namespace {

[[noreturn]] void bad_value(const std::string& flag, const std::string& value,
                            const std::string& expected) {
  throw runtime::InputError("generate: " + flag + " \"" + value + "\": expected " + expected);
}

int64_t parse_integer(const std::string& flag, const std::string& text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty())
    bad_value(flag, text, "an integer");
  return value;
}

float parse_float(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value))
    bad_value(flag, text, "a number");
  return value;
}

// The tokenizer of the flags, else the one of the run's dataset, else the tokenizer.json beside
// a published model's weights (--model DIR as on the Hugging Face Hub).
std::unique_ptr<tokenizer::Tokenizer> resolve_tokenizer(const GenerateOptions& options,
                                                        const Config& config) {
  if (options.tokenizer) return tokenizer::load_tokenizer(*options.tokenizer);
  if (const std::optional<tokenizer::TokenizerSpec> spec = data_tokenizer_spec(config.data))
    return tokenizer::load_tokenizer(*spec);
  const std::filesystem::path published =
      std::filesystem::path(options.model_dir) / "tokenizer.json";
  if (!options.model_dir.empty() && std::filesystem::exists(published)) {
    tokenizer::TokenizerSpec spec;
    spec.kind = tokenizer::TokenizerKind::hf;
    spec.tokenizer_file = published.string();
    return tokenizer::load_tokenizer(spec);
  }
  throw runtime::InputError(
      "generate: no dataset of the run has a .json naming its tokenizer, and no tokenizer.json "
      "is beside the model; give one with --tokenizer and its files, as to prepare-data");
}

}  // namespace

std::string generate_usage() {
  return "usage: trainer generate --model RUN_DIR | --checkpoint STEP_DIR [--prompt TEXT]\n"
         "                        [--max-new-tokens N] [--temperature T] [--top-k K] [--seed S]\n"
         "                        [--tokenizer KIND --vocab-file F --merge-file F\n"
         "                         --tokenizer-file F --split-pattern NAME --eod-id ID]\n"
         "                        [--print-ids] [--device cpu|cuda]\n"
         "        Sample text from a trained model on one process (fp32, key/value cache).\n"
         "        --model: a run's output.dir (model.safetensors, config.json, config.yaml);\n"
         "        --checkpoint: a checkpoint step directory of any parallel layout.\n"
         "        --prompt: the text to continue (default: start a new document at the eod\n"
         "        token). --max-new-tokens (64), --temperature (1.0; 0 is greedy), --top-k (0:\n"
         "        the whole vocabulary), --seed (1234): the same seed gives the same sample.\n"
         "        Generation stops at the eod token. The tokenizer is the data's (the\n"
         "        <prefix>.json of data.path or of data.blend's datasets), else the\n"
         "        tokenizer.json beside --model's weights, unless given with prepare-data's\n"
         "        tokenizer flags.\n"
         "        --print-ids adds a line with the generated token ids.\n"
         "        --device: cpu (default) or cuda, the first GPU (a build with CUDA).\n";
}

GenerateOptions parse_generate_options(const std::vector<std::string>& args) {
  GenerateOptions options;
  tokenizer::TokenizerSpec spec;
  bool tokenizer_flags = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw runtime::InputError("generate: " + flag + " needs a value");
      return args[++i];
    };
    if (flag == "--model") {
      options.model_dir = value();
    } else if (flag == "--checkpoint") {
      options.checkpoint_dir = value();
    } else if (flag == "--prompt") {
      options.prompt = value();
    } else if (flag == "--max-new-tokens") {
      options.sampling.max_new_tokens = parse_integer(flag, value());
    } else if (flag == "--temperature") {
      options.sampling.temperature = parse_float(flag, value());
    } else if (flag == "--top-k") {
      options.sampling.top_k = parse_integer(flag, value());
    } else if (flag == "--seed") {
      const int64_t seed = parse_integer(flag, value());
      if (seed < 0) bad_value(flag, args[i], "an integer >= 0");
      options.sampling.seed = static_cast<uint64_t>(seed);
    } else if (flag == "--print-ids") {
      options.print_ids = true;
    } else if (flag == "--device") {
      const std::string device = value();
      if (device != "cpu" && device != "cuda") bad_value(flag, device, "cpu or cuda");
      options.device = device == "cuda" ? Device::cuda : Device::cpu;
    } else if (parse_tokenizer_flag("generate", flag, value, spec)) {
      tokenizer_flags = tokenizer_flags || flag == "--tokenizer";
    } else {
      throw runtime::InputError("generate: unknown argument '" + flag +
                                "' (see trainer generate --help)");
    }
  }
  const bool file_flags = !spec.vocab_file.empty() || !spec.merge_file.empty() ||
                          !spec.tokenizer_file.empty() || !spec.split_pattern.empty() ||
                          spec.eod_id.has_value();
  if (file_flags && !tokenizer_flags)
    throw runtime::InputError("generate: tokenizer file flags need --tokenizer KIND");
  if (tokenizer_flags) options.tokenizer = spec;
  if (options.model_dir.empty() == options.checkpoint_dir.empty()) {
    throw runtime::InputError(
        "generate: give exactly one of --model RUN_DIR and --checkpoint STEP_DIR");
  }
  check_sampling_options(options.sampling);
  return options;
}

int run_generate(const GenerateOptions& options, std::ostream& out, runtime::Allocator* device) {
  TRAINER_ASSERT((options.device == Device::cuda) == (device != nullptr),
                 "--device cuda runs with the GPU's allocator, cpu without one");
  const std::unique_ptr<LoadedModel> loaded = options.model_dir.empty()
                                                  ? load_checkpoint_model(options.checkpoint_dir)
                                                  : load_exported_model(options.model_dir);
  const model::GptConfig& config = loaded->config.model;
  const std::unique_ptr<tokenizer::Tokenizer> tokenizer =
      resolve_tokenizer(options, loaded->config);
  SamplingOptions sampling = options.sampling;
  sampling.stop_id = tokenizer->identity().eod_id;
  const std::vector<int32_t> prompt = prompt_ids(options.prompt, *tokenizer, config);
  if (config.learned_positions() &&
      static_cast<int64_t>(prompt.size()) + sampling.max_new_tokens > config.positions()) {
    throw runtime::InputError(TRAINER_STR("generate: the prompt's "
                                          << prompt.size() << " tokens + --max-new-tokens "
                                          << sampling.max_new_tokens << " exceed the model's "
                                          << config.positions()
                                          << " learned positions (model.seq_length)"));
  }
  // On a GPU: the weights uploaded to it, f32 as on the host.
  const model::GptParams params =
      device == nullptr
          ? loaded->params
          : model::GptParams::allocate(*device, config, runtime::MemoryCategory::param);
  if (device != nullptr) runtime::ops::upload(params.flat, loaded->params.flat);
  const Sample sample = generate_sample(params, config, prompt, sampling, tokenizer.get(), device);
  // Without a prompt the text starts at the eod token: leave its name out.
  const std::string eod_text =
      options.prompt.empty() ? tokenizer::valid_utf8(tokenizer->decode(prompt)) : "";
  out << sample.text.substr(sample.text.rfind(eod_text, 0) == 0 ? eod_text.size() : 0) << "\n";
  if (options.print_ids) {
    out << "ids:";
    for (const int32_t id : sample.generated) out << " " << id;
    out << "\n";
  }
  return 0;
}

}  // namespace trainer
