// <prefix>.json -> TokenizerSpec: the identity read_dataset_tokenizer parses, files in the order
// prepare-data wrote them (gpt2: vocab, merges; the others: the tokenizer file), tiktoken's split
// pattern back to its name, digests checked.
#include "trainer/generate/dataset_tokenizer.h"

#include "runtime/error.h"
#include "trainer/data/dataset_metadata.h"
#include "trainer/tokenizer/bpe_tokenizer.h"
#include "trainer/tokenizer/split_pattern.h"

namespace trainer {
namespace {

// The name of a named split pattern from its regex ("" when it is none of them).
std::string split_pattern_name(const std::string& regex) {
  for (const char* name : {"gpt2", "cl100k", "o200k", "llama3"})
    if (tokenizer::named_split_pattern(name) == regex) return name;
  return "";
}

}  // namespace

std::optional<tokenizer::TokenizerSpec> dataset_tokenizer_spec(const std::string& prefix) {
  const std::string path = prefix + ".json";
  const std::optional<tokenizer::TokenizerIdentity> identity = read_dataset_tokenizer(prefix);
  if (!identity) return std::nullopt;
  tokenizer::TokenizerSpec spec;
  spec.kind = tokenizer::parse_kind(identity->kind);
  spec.eod_id = identity->eod_id;
  if (spec.kind == tokenizer::TokenizerKind::tiktoken)
    spec.split_pattern = split_pattern_name(identity->split_pattern);
  std::vector<std::string> files;
  for (const tokenizer::TokenizerFileDigest& file : identity->files) {
    tokenizer::TokenizerFileDigest now;
    try {
      now = tokenizer::digest_file(file.path);
    } catch (const runtime::InputError& error) {
      throw runtime::InputError(path + " names tokenizer file " + file.path +
                                ", which cannot be read (" + error.what() + ")");
    }
    if (now.sha256 != file.sha256) {
      throw runtime::InputError(TRAINER_STR(path << ": tokenizer file " << file.path
                                                 << " changed since prepare-data (sha256 "
                                                 << now.sha256 << ", recorded " << file.sha256
                                                 << ")"));
    }
    files.push_back(file.path);
  }
  const size_t expected = spec.kind == tokenizer::TokenizerKind::gpt2   ? 2
                          : spec.kind == tokenizer::TokenizerKind::byte ? 0
                                                                        : 1;
  if (files.size() != expected) {
    throw runtime::InputError(TRAINER_STR(path << ": tokenizer " << tokenizer::kind_name(spec.kind)
                                               << " names " << files.size()
                                               << " files, expected " << expected));
  }
  if (spec.kind == tokenizer::TokenizerKind::gpt2) {
    spec.vocab_file = files[0];
    spec.merge_file = files[1];
  } else if (expected == 1) {
    spec.tokenizer_file = files[0];
  }
  return spec;
}

std::optional<tokenizer::TokenizerSpec> data_tokenizer_spec(const DataConfig& data) {
  for (const BlendEntry& source : data_sources(data)) {
    if (auto spec = dataset_tokenizer_spec(source.path)) return spec;
  }
  return std::nullopt;
}

}  // namespace trainer
