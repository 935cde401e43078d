// prepare-data's flag parser: `--flag value` or `--flag=value`, switches take no value, and the
// cross-flag rules (inputs or --synthetic; tokenizer files that fit --tokenizer).
// Rules: every bad flag, value or combination is an InputError naming the flag and value.
#include "trainer/data/prepare_data_options.h"

#include <charconv>
#include <functional>

#include "runtime/error.h"
#include "trainer/data/prepare_data.h"
#include "trainer/tokenizer/split_pattern.h"

namespace trainer {
namespace {

using tokenizer::TokenizerKind;

[[noreturn]] void bad_value(const std::string& flag, const std::string& value,
                            const std::string& expected) {
  throw runtime::InputError(
      TRAINER_STR("prepare-data: " << flag << " \"" << value << "\": expected " << expected));
}

template <typename Integer>
Integer parse_integer(const std::string& flag, const std::string& value, Integer minimum) {
  Integer parsed{};
  const char* end = value.data() + value.size();
  const auto [stop, error] = std::from_chars(value.data(), end, parsed);
  if (value.empty() || error != std::errc() || stop != end || parsed < minimum) {
    bad_value(flag, value, TRAINER_STR("an integer >= " << +minimum));
  }
  return parsed;
}

double parse_double(const std::string& flag, const std::string& value) {
  double parsed = 0;
  const char* end = value.data() + value.size();
  const auto [stop, error] = std::from_chars(value.data(), end, parsed);
  if (value.empty() || error != std::errc() || stop != end) bad_value(flag, value, "a number");
  return parsed;
}

// The synthetic corpus's flags; false for any other flag.
bool parse_synthetic_flag(const std::string& flag, const std::function<std::string()>& value,
                          SyntheticCorpusSpec& spec) {
  if (flag == "--num-tokens") {
    spec.num_tokens = parse_integer<int64_t>(flag, value(), 3);
  } else if (flag == "--seed") {
    spec.seed = parse_integer<uint64_t>(flag, value(), 0);
  } else if (flag == "--alphabet") {
    spec.alphabet = parse_integer<int>(flag, value(), 2);
  } else if (flag == "--branching") {
    spec.branching = parse_integer<int>(flag, value(), 1);
  } else if (flag == "--uniform-mix") {
    const std::string text = value();
    spec.uniform_mix = parse_double(flag, text);
    if (!(spec.uniform_mix > 0 && spec.uniform_mix <= 1)) {
      bad_value(flag, text, "a number in (0, 1]");
    }
  } else {
    return false;
  }
  return true;
}

// The flags that only some tokenizers (or the text path) use, as seen on the command line.
struct FlagsSeen {
  std::vector<std::string> synthetic;  // for "needs --synthetic"
  std::vector<std::string> text;       // tokenizer and input flags, for "--synthetic takes no"
};

void check_tokenizer_files(const PrepareDataOptions& options) {
  const tokenizer::TokenizerSpec& spec = options.tokenizer;
  const std::string kind = tokenizer::kind_name(spec.kind);
  auto only_for = [&](const std::string& value, const char* flag, bool allowed, const char* kinds) {
    if (!value.empty() && !allowed) {
      throw runtime::InputError(TRAINER_STR("prepare-data: " << flag << " applies to --tokenizer "
                                                             << kinds << ", not " << kind));
    }
  };
  only_for(spec.vocab_file, "--vocab-file", spec.kind == TokenizerKind::gpt2, "gpt2");
  only_for(spec.merge_file, "--merge-file", spec.kind == TokenizerKind::gpt2, "gpt2");
  only_for(spec.tokenizer_file, "--tokenizer-file",
           spec.kind == TokenizerKind::hf || spec.kind == TokenizerKind::tiktoken ||
               spec.kind == TokenizerKind::sentencepiece,
           "hf, tiktoken or sentencepiece");
  only_for(spec.split_pattern, "--split-pattern", spec.kind == TokenizerKind::tiktoken, "tiktoken");
  auto required = [&](const std::string& value, const char* flag) {
    if (value.empty()) {
      throw runtime::InputError(
          TRAINER_STR("prepare-data: --tokenizer " << kind << " needs " << flag));
    }
  };
  if (spec.kind == TokenizerKind::gpt2) {
    required(spec.vocab_file, "--vocab-file (vocab.json / encoder.json)");
    required(spec.merge_file, "--merge-file (merges.txt / vocab.bpe)");
  } else if (spec.kind != TokenizerKind::byte) {
    required(spec.tokenizer_file, "--tokenizer-file");
  }
  if (spec.kind == TokenizerKind::tiktoken) {
    required(spec.split_pattern,
             TRAINER_STR("--split-pattern (" << tokenizer::kSplitPatternNames << ")").c_str());
    tokenizer::named_split_pattern(spec.split_pattern);  // an unknown name fails here, early
  }
}

void check_options(const PrepareDataOptions& options, const FlagsSeen& seen) {
  if (options.output_prefix.empty()) {
    throw runtime::InputError("prepare-data: --output-prefix is required");
  }
  if (options.synthetic) {
    if (!options.inputs.empty()) {
      throw runtime::InputError(TRAINER_STR("prepare-data: --synthetic takes no --input (got \""
                                            << options.inputs.front() << "\")"));
    }
    if (options.append_eod || options.split_lines) {
      throw runtime::InputError(TRAINER_STR(
          "prepare-data: --synthetic writes one document; "
          << (options.append_eod ? "--append-eod" : "--split-lines") << " does not apply"));
    }
    if (!seen.text.empty()) {
      throw runtime::InputError(TRAINER_STR("prepare-data: --synthetic takes no "
                                            << seen.text.front()
                                            << " (its token ids are the chain's symbols)"));
    }
    return;
  }
  if (!seen.synthetic.empty()) {
    throw runtime::InputError(
        TRAINER_STR("prepare-data: " << seen.synthetic.front() << " needs --synthetic"));
  }
  if (options.inputs.empty()) {
    throw runtime::InputError("prepare-data: no --input file given (or use --synthetic)");
  }
  check_tokenizer_files(options);
}

// Tokenizer and text-input flags; false for any other flag.
bool parse_text_flag(const std::string& flag, const std::function<std::string()>& value,
                     PrepareDataOptions& options) {
  if (parse_tokenizer_flag("prepare-data", flag, value, options.tokenizer)) {
    return true;
  } else if (flag == "--json-key") {
    options.json_key = value();
    if (options.json_key.empty()) bad_value(flag, "", "a member name");
  } else if (flag == "--workers") {
    options.workers = parse_integer<int>(flag, value(), 1);
  } else {
    return false;
  }
  return true;
}

}  // namespace

bool parse_tokenizer_flag(const std::string& command, const std::string& flag,
                          const std::function<std::string()>& value,
                          tokenizer::TokenizerSpec& spec) {
  if (flag == "--tokenizer") {
    spec.kind = tokenizer::parse_kind(value());
  } else if (flag == "--vocab-file") {
    spec.vocab_file = value();
  } else if (flag == "--merge-file") {
    spec.merge_file = value();
  } else if (flag == "--tokenizer-file") {
    spec.tokenizer_file = value();
  } else if (flag == "--split-pattern") {
    spec.split_pattern = value();
  } else if (flag == "--eod-id") {
    const std::string text = value();
    int32_t id = -1;
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, id);
    if (text.empty() || error != std::errc() || stop != end || id < 0) {
      throw runtime::InputError(
          TRAINER_STR(command << ": " << flag << " \"" << text << "\": expected an id >= 0"));
    }
    spec.eod_id = id;
  } else {
    return false;
  }
  return true;
}

PrepareDataOptions parse_prepare_data_options(const std::vector<std::string>& args) {
  PrepareDataOptions options;
  FlagsSeen seen;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (const size_t equals = flag.find('=');
        flag.rfind("--", 0) == 0 && equals != std::string::npos) {
      inline_value = flag.substr(equals + 1);
      flag.resize(equals);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0) {
        throw runtime::InputError(TRAINER_STR("prepare-data: " << flag << " needs a value"));
      }
      return args[++i];
    };
    auto no_value = [&]() {
      if (inline_value) bad_value(flag, *inline_value, "no value (it is a switch)");
    };
    if (flag == "--help" || flag == "-h") {
      no_value();
      options.help = true;
    } else if (flag == "--input") {
      options.inputs.push_back(value());
    } else if (flag == "--output-prefix") {
      options.output_prefix = value();
      if (options.output_prefix.empty()) bad_value(flag, "", "a non-empty path prefix");
    } else if (flag == "--append-eod") {
      no_value();
      options.append_eod = true;
    } else if (flag == "--split-lines") {
      no_value();
      options.split_lines = true;
    } else if (flag == "--skip-bad-lines") {
      no_value();
      options.skip_bad_lines = true;
      seen.text.push_back(flag);
    } else if (flag == "--dtype") {
      const std::string name = value();
      if (name == "uint16") {
        options.dtype = TokenDType::uint16;
      } else if (name == "int32") {
        options.dtype = TokenDType::int32;
      } else {
        bad_value(flag, name, "uint16 or int32");
      }
    } else if (flag == "--synthetic") {
      no_value();
      options.synthetic = true;
    } else if (parse_synthetic_flag(flag, value, options.spec)) {
      seen.synthetic.push_back(flag);
    } else if (parse_text_flag(flag, value, options)) {
      seen.text.push_back(flag);
    } else {
      throw runtime::InputError(TRAINER_STR("prepare-data: unknown flag \""
                                            << args[i] << "\" (see trainer prepare-data --help)"));
    }
  }
  if (!options.help) check_options(options, seen);
  return options;
}

std::string prepare_data_usage() {
  return "usage: trainer prepare-data --input FILE [--input FILE ...] --output-prefix P\n"
         "           [--tokenizer byte|gpt2|hf|tiktoken|sentencepiece] [tokenizer files]\n"
         "           [--append-eod] [--split-lines] [--json-key K] [--skip-bad-lines]\n"
         "           [--workers N] [--dtype uint16|int32]\n"
         "       trainer prepare-data --synthetic --output-prefix P [--num-tokens N] [--seed S]\n"
         "           [--alphabet A] [--branching K] [--uniform-mix X]\n"
         "\n"
         "Writes the Megatron indexed dataset P.bin + P.idx, and P.json naming the tokenizer.\n"
         "Inputs:\n"
         "  --input FILE          a document source, in order: raw text (each file one document),\n"
         "                        or JSON Lines (.jsonl / .json: one document per line); a .gz or\n"
         "                        .zst suffix is decompressed\n"
         "  --split-lines         raw text: each non-empty line is a document (newline dropped)\n"
         "  --json-key K          JSON Lines: the member holding the text (default text)\n"
         "  --skip-bad-lines      count and skip malformed lines instead of stopping\n"
         "Tokenizers (--tokenizer, default byte):\n"
         "  byte                  each byte is a token 0..255; end of document 256\n"
         "  gpt2                  --vocab-file vocab.json (encoder.json) --merge-file merges.txt\n"
         "                        (vocab.bpe); end of document <|endoftext|>\n"
         "  hf                    --tokenizer-file tokenizer.json (byte-level BPE: GPT-2, Llama "
         "3,\n"
         "                        Qwen2); end of document <|endoftext|>, <|end_of_text|>, </s>\n"
         "  tiktoken              --tokenizer-file X.tiktoken --split-pattern gpt2|cl100k|o200k|\n"
         "                        llama3 --eod-id ID (e.g. cl100k_base 100257, o200k_base 199999)\n"
         "  sentencepiece         --tokenizer-file spm.model; end of document its eos id\n"
         "  --eod-id ID           the end-of-document id (overrides the tokenizer's own)\n"
         "  Text that spells a special token (<|endoftext|>) is plain text.\n"
         "Output:\n"
         "  --output-prefix P     output path prefix (directories are created)\n"
         "  --append-eod          end every document with the end-of-document id\n"
         "  --dtype T             token storage: uint16 or int32 (default: uint16 when the\n"
         "                        vocabulary fits, int32 otherwise)\n"
         "  --workers N           tokenizing threads (default: every core); the output is the\n"
         "                        same for every N\n"
         "Synthetic corpus:\n"
         "  --synthetic           one document of an order-2 Markov chain of known entropy, plus\n"
         "                        P.json with its entropies (nats); token ids are printable bytes\n"
         "  --num-tokens N        synthetic tokens (default 4000000)\n"
         "  --seed S              synthetic chain and stream seed (default 1234)\n"
         "  --alphabet A          symbols, 2..95 (default 32)\n"
         "  --branching K         likely successors per two-symbol context (default 4)\n"
         "  --uniform-mix X       probability spread uniformly over all symbols, (0, 1] (default\n"
         "                        0.02)\n"
         "  --help                this text\n";
}

}  // namespace trainer
