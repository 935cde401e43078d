// `trainer prepare-data`: checks the flags and inputs, loads the tokenizer, picks the token
// dtype, tokenizes (tokenize_pipeline.h) and commits .bin, .idx and .json together at the end.
// Rules: every error is raised before anything is renamed into place, so none leaves output.
#include "trainer/data/prepare_data.h"

#include <cstdio>
#include <filesystem>
#include <thread>

#include "runtime/error.h"
#include "trainer/data/dataset_metadata.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/prepare_data_options.h"
#include "trainer/data/synthetic.h"
#include "trainer/data/tokenize_pipeline.h"

namespace trainer {
namespace {

constexpr int64_t kUint16Ids = 65536;

void check_input_exists(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw runtime::InputError(
        TRAINER_STR("prepare-data: --input \"" << path << "\": no such regular file"));
  }
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

const char* dtype_name(TokenDType dtype) {
  return dtype == TokenDType::uint16 ? "uint16" : "int32";
}

// --dtype when given (InputError when the vocabulary does not fit it), else the smallest that fits.
TokenDType token_dtype(const PrepareDataOptions& options,
                       const tokenizer::TokenizerIdentity& identity) {
  const bool fits_uint16 = identity.vocab_size <= kUint16Ids;
  if (!options.dtype) return fits_uint16 ? TokenDType::uint16 : TokenDType::int32;
  if (*options.dtype == TokenDType::uint16 && !fits_uint16) {
    throw runtime::InputError(TRAINER_STR("prepare-data: --dtype uint16 holds ids below "
                                          << kUint16Ids << ", but the " << identity.kind
                                          << " tokenizer has " << identity.vocab_size
                                          << " ids (use --dtype int32)"));
  }
  return *options.dtype;
}

int write_synthetic(const PrepareDataOptions& options) {
  const std::string& prefix = options.output_prefix;
  const TokenDType dtype = options.dtype.value_or(TokenDType::uint16);
  const SyntheticCorpus corpus = make_synthetic_corpus(options.spec);
  IndexedDatasetWriter writer(prefix, dtype);
  writer.add_document(corpus.tokens);
  writer.finish();
  write_synthetic_metadata(prefix, options.spec, corpus.entropy);
  const SyntheticEntropy& entropy = corpus.entropy;
  std::printf(
      "prepare-data: wrote 1 document, %lld tokens (%s) to %s.bin, %s.idx, %s.json\n"
      "synthetic order-2 Markov: entropy rate H = %.6f nats/token (order-1 H1 = %.6f, "
      "marginal H0 = %.6f)\n"
      "loss floor for seq_length S = (H1 + (S - 1) * H) / S, e.g. S = 128: %.6f nats\n",
      static_cast<long long>(corpus.tokens.size()), dtype_name(dtype), prefix.c_str(),
      prefix.c_str(), prefix.c_str(), entropy.rate, entropy.order1, entropy.marginal,
      entropy.loss_floor(128));
  return 0;
}

int write_tokenized(const PrepareDataOptions& options) {
  const std::unique_ptr<tokenizer::Tokenizer> tokenizer =
      tokenizer::load_tokenizer(options.tokenizer);
  const tokenizer::TokenizerIdentity& identity = tokenizer->identity();
  if (options.append_eod && !identity.eod_id) {
    throw runtime::InputError(
        TRAINER_STR("prepare-data: --append-eod: the "
                    << identity.kind << " tokenizer has no end-of-document token; give --eod-id"));
  }
  const TokenDType dtype = token_dtype(options, identity);
  TokenizeOptions tokenize;
  tokenize.inputs = options.inputs;
  tokenize.split_lines = options.split_lines;
  tokenize.json_key = options.json_key;
  tokenize.skip_bad_lines = options.skip_bad_lines;
  tokenize.append_eod = options.append_eod;
  tokenize.workers = options.workers > 0
                         ? options.workers
                         : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  const std::string& prefix = options.output_prefix;
  IndexedDatasetWriter writer(prefix, dtype);  // temporaries until finish()
  const TokenizeCounts counts = tokenize_inputs(*tokenizer, tokenize, writer);
  DatasetMetadata metadata;
  metadata.tokenizer = identity;
  metadata.dtype = dtype_name(dtype);
  metadata.append_eod = options.append_eod;
  metadata.inputs = options.inputs;
  metadata.documents = counts.documents;
  metadata.tokens = counts.tokens;
  metadata.text_bytes = counts.text_bytes;
  metadata.bad_lines = counts.bad_lines;
  DatasetMetadataFile metadata_file(prefix, metadata);
  writer.finish();
  metadata_file.commit();
  std::printf(
      "prepare-data: wrote %lld documents, %lld tokens (%s) to %s.bin, %s.idx, %s.json\n"
      "tokenizer %s: vocabulary %lld ids, end of document %s\n",
      static_cast<long long>(counts.documents), static_cast<long long>(counts.tokens),
      dtype_name(dtype), prefix.c_str(), prefix.c_str(), prefix.c_str(), identity.kind.c_str(),
      static_cast<long long>(identity.vocab_size),
      identity.eod_id ? std::to_string(*identity.eod_id).c_str() : "none");
  return 0;
}

}  // namespace

int run_prepare_data(const std::vector<std::string>& args) {
  const PrepareDataOptions options = parse_prepare_data_options(args);
  if (options.help) {
    std::fputs(prepare_data_usage().c_str(), stdout);
    return 0;
  }
  for (const std::string& path : options.inputs) check_input_exists(path);  // before any output
  create_parent_directory(options.output_prefix);
  return options.synthetic ? write_synthetic(options) : write_tokenized(options);
}

}  // namespace trainer
