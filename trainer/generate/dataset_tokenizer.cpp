// <prefix>.json -> TokenizerSpec: files in the order prepare-data wrote them (gpt2: vocab, merges;
// the others: the tokenizer file), tiktoken's split pattern back to its name, digests checked.
#include "trainer/generate/dataset_tokenizer.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/error.h"
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
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw runtime::InputError("generate: cannot read " + path +
                              " (the dataset's tokenizer); give the tokenizer with --tokenizer "
                              "and its files, as to prepare-data");
  }
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(
        std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  } catch (const nlohmann::json::exception& error) {
    throw runtime::InputError(path + ": not valid JSON: " + error.what());
  }
  if (!root.is_object() || !root.contains("tokenizer")) return std::nullopt;
  const nlohmann::json& identity = root["tokenizer"];
  tokenizer::TokenizerSpec spec;
  std::vector<std::string> files;
  try {
    spec.kind = tokenizer::parse_kind(identity.at("kind").get<std::string>());
    for (const nlohmann::json& file : identity.at("files")) {
      const std::string file_path = file.at("path").get<std::string>();
      const std::string recorded = file.at("sha256").get<std::string>();
      tokenizer::TokenizerFileDigest now;
      try {
        now = tokenizer::digest_file(file_path);
      } catch (const runtime::InputError& error) {
        throw runtime::InputError(path + " names tokenizer file " + file_path +
                                  ", which cannot be read (" + error.what() + ")");
      }
      if (now.sha256 != recorded) {
        throw runtime::InputError(TRAINER_STR(path << ": tokenizer file " << file_path
                                                   << " changed since prepare-data (sha256 "
                                                   << now.sha256 << ", recorded " << recorded
                                                   << ")"));
      }
      files.push_back(file_path);
    }
    if (!identity.at("eod_id").is_null()) spec.eod_id = identity.at("eod_id").get<int32_t>();
    if (spec.kind == tokenizer::TokenizerKind::tiktoken)
      spec.split_pattern = split_pattern_name(identity.at("split_pattern").get<std::string>());
  } catch (const nlohmann::json::exception& error) {
    throw runtime::InputError(path + ": malformed \"tokenizer\": " + error.what());
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

}  // namespace trainer
