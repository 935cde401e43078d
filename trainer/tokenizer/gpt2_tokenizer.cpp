// The gpt2 tokenizer: GPT-2's vocab.json (encoder.json) and merges.txt (vocab.bpe), split by
// GPT-2's regex, end of document `<|endoftext|>`. Rules: merges.txt may open with a `#version`
// line; every other non-empty line is two tokens and one space, its rank its order.
#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "trainer/tokenizer/bpe_tokenizer.h"
#include "trainer/tokenizer/tokenizer_loaders.h"

namespace trainer::tokenizer {
namespace {

StringMap<int32_t> parse_vocab_json(const std::string& path, const std::string& text) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw runtime::InputError(TRAINER_STR(path << ": not valid JSON: " << error.what()));
  }
  if (!root.is_object()) {
    throw runtime::InputError(TRAINER_STR(path << ": expected a JSON object of token -> id"));
  }
  StringMap<int32_t> vocab;
  vocab.reserve(root.size());
  for (const auto& [token, id] : root.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      throw runtime::InputError(TRAINER_STR(path << ": token \"" << token << "\" has id "
                                                 << id.dump()
                                                 << ", expected an integer in [0, 2^31)"));
    }
    vocab.emplace(token, id.get<int32_t>());
  }
  return vocab;
}

std::vector<std::pair<std::string, std::string>> parse_merges_txt(const std::string& path,
                                                                  const std::string& text) {
  std::vector<std::pair<std::string, std::string>> merges;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t stop = text.find('\n', start);
    if (stop == std::string::npos) stop = text.size();
    std::string_view line(text.data() + start, stop - start);
    start = stop + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      throw runtime::InputError(TRAINER_STR(path << " line " << line_number << ": \"" << line
                                                 << "\": expected two tokens and one space"));
    }
    merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
  }
  return merges;
}

// Merge i is on line i + 2 of GPT-2's file (after `#version`); name it by index otherwise.
std::string merges_txt_origin(const std::string& file, size_t merge_index) {
  return TRAINER_STR(file << " merge " << merge_index + 1);
}

}  // namespace

std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const TokenizerSpec& spec) {
  const std::string vocab_text = read_tokenizer_file("--vocab-file", spec.vocab_file);
  const std::string merges_text = read_tokenizer_file("--merge-file", spec.merge_file);
  const StringMap<int32_t> vocab = parse_vocab_json(spec.vocab_file, vocab_text);
  BpeTokenizerParts parts;
  parts.model = byte_level_model(vocab, parse_merges_txt(spec.merge_file, merges_text),
                                 /*whole_pieces=*/false, spec.merge_file, merges_txt_origin);
  const std::string pattern = named_split_pattern("gpt2");
  parts.steps.push_back({std::make_shared<SplitPattern>(pattern, "gpt2 split"), true, false});

  TokenizerIdentity& identity = parts.identity;
  identity.kind = "gpt2";
  identity.files = {digest_file(spec.vocab_file), digest_file(spec.merge_file)};
  identity.split_pattern = pattern;
  int64_t max_id = 0;
  for (const auto& [token, id] : vocab) max_id = std::max<int64_t>(max_id, id);
  identity.eod_id = spec.eod_id;
  if (!identity.eod_id) {
    if (const auto found = vocab.find("<|endoftext|>"); found != vocab.end()) {
      identity.eod_id = found->second;
    }
  }
  if (identity.eod_id) max_id = std::max<int64_t>(max_id, *identity.eod_id);
  identity.vocab_size = max_id + 1;
  parts.token_bytes = byte_level_token_bytes_table(vocab);
  if (identity.eod_id && !parts.token_bytes.has(*identity.eod_id))
    parts.token_bytes.set(*identity.eod_id, kEndOfTextName);
  return make_bpe_tokenizer(std::move(parts));
}

}  // namespace trainer::tokenizer
