// `trainer prepare-data`: parses its flags, tokenizes text files with the byte
// tokenizer (or generates the synthetic corpus) and writes one indexed dataset.
// Rules: every bad flag, value or input is an InputError naming the flag and value.
#include "trainer/data/prepare_data.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string_view>

#include "runtime/error.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/synthetic.h"

namespace trainer {
namespace {

struct PrepareDataOptions {
  std::vector<std::string> inputs;  // --input, in order
  std::string output_prefix;
  bool append_eod = false;
  bool split_lines = false;
  TokenDType dtype = TokenDType::uint16;
  bool synthetic = false;
  SyntheticCorpusSpec spec;
  std::vector<std::string> synthetic_flags_seen;  // for "needs --synthetic" errors
  bool help = false;
};

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
                          PrepareDataOptions& options) {
  SyntheticCorpusSpec& spec = options.spec;
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

// Cross-flag rules: an output, and either inputs or --synthetic (with its own flags only).
void check_options(const PrepareDataOptions& options) {
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
  } else {
    if (!options.synthetic_flags_seen.empty()) {
      throw runtime::InputError(TRAINER_STR("prepare-data: " << options.synthetic_flags_seen.front()
                                                             << " needs --synthetic"));
    }
    if (options.inputs.empty()) {
      throw runtime::InputError("prepare-data: no --input file given (or use --synthetic)");
    }
  }
}

PrepareDataOptions parse_options(const std::vector<std::string>& args) {
  PrepareDataOptions options;
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
    } else if (parse_synthetic_flag(flag, value, options)) {
      options.synthetic_flags_seen.push_back(flag);
    } else {
      throw runtime::InputError(TRAINER_STR("prepare-data: unknown flag \""
                                            << args[i] << "\" (see trainer prepare-data --help)"));
    }
  }
  if (!options.help) check_options(options);
  return options;
}

void check_input_exists(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw runtime::InputError(
        TRAINER_STR("prepare-data: --input \"" << path << "\": no such regular file"));
  }
}

std::string read_file(const std::string& path) {
  check_input_exists(path);
  std::ifstream stream(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
  if (!stream && !stream.eof()) {
    throw runtime::InputError(TRAINER_STR("prepare-data: --input \"" << path << "\": read failed"));
  }
  return bytes;
}

// Byte tokenizer: token = byte value 0..255, then 256 when append_eod.
void add_bytes(IndexedDatasetWriter& writer, std::string_view bytes, bool append_eod,
               std::vector<int32_t>* scratch, int64_t* tokens_written) {
  scratch->clear();
  for (const char byte : bytes) scratch->push_back(static_cast<unsigned char>(byte));
  if (append_eod) scratch->push_back(kEndOfDocumentToken);
  writer.add_document(*scratch);
  *tokens_written += static_cast<int64_t>(scratch->size());
}

void create_parent_directory(const std::string& prefix) {
  const std::filesystem::path parent = std::filesystem::path(prefix).parent_path();
  if (parent.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(parent, error);
  if (error) {
    throw runtime::InputError(TRAINER_STR("prepare-data: --output-prefix \""
                                          << prefix << "\": cannot create directory " << parent
                                          << ": " << error.message()));
  }
}

}  // namespace

std::string prepare_data_usage() {
  return "usage: trainer prepare-data --input FILE [--input FILE ...] --output-prefix P\n"
         "                            [--append-eod] [--split-lines] [--dtype uint16|int32]\n"
         "       trainer prepare-data --synthetic --output-prefix P [--num-tokens N] [--seed S]\n"
         "                            [--alphabet A] [--branching K] [--uniform-mix X]\n"
         "\n"
         "Writes the Megatron indexed dataset P.bin + P.idx.\n"
         "  --input FILE       a text file; each file is one document, its bytes are tokens "
         "0..255\n"
         "  --output-prefix P  output path prefix (directories are created)\n"
         "  --append-eod       end every document with token 256 (vocabulary 257)\n"
         "  --split-lines      each non-empty line is a document (the newline is dropped)\n"
         "  --dtype T          token storage: uint16 (default) or int32\n"
         "  --synthetic        one document of an order-2 Markov chain of known entropy, plus\n"
         "                     P.json with its entropies (nats); token ids are printable bytes\n"
         "  --num-tokens N     synthetic tokens (default 4000000)\n"
         "  --seed S           synthetic chain and stream seed (default 1234)\n"
         "  --alphabet A       symbols, 2..95 (default 32)\n"
         "  --branching K      likely successors per two-symbol context (default 4)\n"
         "  --uniform-mix X    probability spread uniformly over all symbols, (0, 1] (default "
         "0.02)\n"
         "  --help             this text\n";
}

int run_prepare_data(const std::vector<std::string>& args) {
  const PrepareDataOptions options = parse_options(args);
  if (options.help) {
    std::fputs(prepare_data_usage().c_str(), stdout);
    return 0;
  }
  for (const std::string& path : options.inputs) check_input_exists(path);  // before any output
  create_parent_directory(options.output_prefix);
  const std::string& prefix = options.output_prefix;
  const char* dtype_name = options.dtype == TokenDType::uint16 ? "uint16" : "int32";

  if (options.synthetic) {
    const SyntheticCorpus corpus = make_synthetic_corpus(options.spec);
    IndexedDatasetWriter writer(prefix, options.dtype);
    writer.add_document(corpus.tokens);
    writer.finish();
    write_synthetic_metadata(prefix, options.spec, corpus.entropy);
    const SyntheticEntropy& entropy = corpus.entropy;
    std::printf(
        "prepare-data: wrote 1 document, %lld tokens (%s) to %s.bin, %s.idx, %s.json\n"
        "synthetic order-2 Markov: entropy rate H = %.6f nats/token (order-1 H1 = %.6f, "
        "marginal H0 = %.6f)\n"
        "loss floor for seq_length S = (H1 + (S - 1) * H) / S, e.g. S = 128: %.6f nats\n",
        static_cast<long long>(corpus.tokens.size()), dtype_name, prefix.c_str(), prefix.c_str(),
        prefix.c_str(), entropy.rate, entropy.order1, entropy.marginal, entropy.loss_floor(128));
    return 0;
  }

  IndexedDatasetWriter writer(prefix, options.dtype);
  std::vector<int32_t> scratch;
  int64_t documents = 0, tokens = 0;
  for (const std::string& path : options.inputs) {
    const std::string bytes = read_file(path);
    if (!options.split_lines) {
      add_bytes(writer, bytes, options.append_eod, &scratch, &tokens);
      ++documents;
      continue;
    }
    const std::string_view view(bytes);
    for (size_t start = 0; start < view.size();) {
      size_t stop = view.find('\n', start);
      if (stop == std::string_view::npos) stop = view.size();
      if (stop > start) {
        add_bytes(writer, view.substr(start, stop - start), options.append_eod, &scratch, &tokens);
        ++documents;
      }
      start = stop + 1;
    }
  }
  writer.finish();
  std::printf("prepare-data: wrote %lld documents, %lld tokens (%s) to %s.bin, %s.idx\n",
              static_cast<long long>(documents), static_cast<long long>(tokens), dtype_name,
              prefix.c_str(), prefix.c_str());
  return 0;
}

}  // namespace trainer
