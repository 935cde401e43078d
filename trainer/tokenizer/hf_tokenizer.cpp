// The hf tokenizer: a Hugging Face tokenizer.json of the byte-level BPE family (GPT-2, Llama 3,
// Qwen2): model BPE, normalizer null or NFC, pre_tokenizer ByteLevel or Sequence[Split(Regex,
// Isolated)..., ByteLevel].
// Rules: a component that could change ids and is not supported is an InputError naming its JSON
// path; decoder, post_processor, truncation and padding do not change prepare-data's ids; special
// added tokens are never matched in the text, non-special ones are.
//
// JSON: nlohmann-json (Debian nlohmann-json3-dev), strict RFC 8259 with exact \u escapes and
// surrogate pairs; tokenizer.json files reach 10 MB and need a full tree, JSON Lines need the same
// decoding, so one well-tested parser serves both.
#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "trainer/tokenizer/bpe_tokenizer.h"
#include "trainer/tokenizer/tokenizer_loaders.h"

namespace trainer::tokenizer {
namespace {

using Json = nlohmann::json;

class TokenizerJson {
 public:
  explicit TokenizerJson(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& json_path, const std::string& message) const {
    throw runtime::InputError(TRAINER_STR(path_ << ": " << json_path << " " << message));
  }
  [[noreturn]] void unsupported(const std::string& json_path, const Json& value) const {
    fail(json_path, value.dump() + " is not supported");
  }
  const Json& member(const Json& object, const std::string& json_path, const char* key) const {
    if (!object.is_object() || !object.contains(key)) fail(json_path + "." + key, "is missing");
    return object[key];
  }
  // A boolean member, or fallback when absent or null.
  bool flag(const Json& object, const std::string& json_path, const char* key,
            bool fallback) const {
    if (!object.contains(key) || object[key].is_null()) return fallback;
    if (!object[key].is_boolean()) fail(json_path + "." + key, "is not true or false");
    return object[key].get<bool>();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string merges_origin(const std::string& file, size_t merge_index) {
  return TRAINER_STR(file << ": model.merges[" << merge_index << "]");
}

std::string regex_escape(const std::string& literal) {
  std::string escaped;
  for (const char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) escaped += '\\';
    escaped += c;
  }
  return escaped;
}

PreTokenizeStep parse_split(const TokenizerJson& file, const Json& split, const std::string& at) {
  const Json& behavior = file.member(split, at, "behavior");
  if (behavior != "Isolated") file.unsupported(at + ".behavior", behavior);
  if (file.flag(split, at, "invert", false)) file.fail(at + ".invert", "true is not supported");
  const Json& pattern = file.member(split, at, "pattern");
  std::string regex;
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    regex = pattern["Regex"].get<std::string>();
  } else if (pattern.contains("String") && pattern["String"].is_string()) {
    regex = regex_escape(pattern["String"].get<std::string>());
  } else {
    file.unsupported(at + ".pattern", pattern);
  }
  return {std::make_shared<SplitPattern>(regex, file.path() + ": " + at + ".pattern"), true, false};
}

PreTokenizeStep parse_byte_level(const TokenizerJson& file, const Json& byte_level,
                                 const std::string& at) {
  PreTokenizeStep step;
  step.add_prefix_space = file.flag(byte_level, at, "add_prefix_space", true);
  if (file.flag(byte_level, at, "use_regex", true)) {
    step.pattern = std::make_shared<SplitPattern>(named_split_pattern("gpt2"), "ByteLevel regex");
  }
  return step;
}

// Steps in order; the last must be ByteLevel (it maps bytes for the BPE model).
std::vector<PreTokenizeStep> parse_pre_tokenizer(const TokenizerJson& file, const Json& root) {
  const std::string at = "pre_tokenizer";
  const Json& pre = file.member(root, "", "pre_tokenizer");
  if (pre.is_null())
    file.fail(at, "is null: only byte-level BPE (a ByteLevel pre_tokenizer) is supported");
  const Json& type = file.member(pre, at, "type");
  std::vector<PreTokenizeStep> steps;
  if (type == "ByteLevel") {
    steps.push_back(parse_byte_level(file, pre, at));
    return steps;
  }
  if (type != "Sequence") file.unsupported(at + ".type", type);
  const Json& list = file.member(pre, at, "pretokenizers");
  if (!list.is_array() || list.empty()) file.fail(at + ".pretokenizers", "is not a non-empty list");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item_at = TRAINER_STR(at << ".pretokenizers[" << i << "]");
    const Json& item_type = file.member(list[i], item_at, "type");
    const bool last = i + 1 == list.size();
    if (item_type == "Split" && !last) {
      steps.push_back(parse_split(file, list[i], item_at));
    } else if (item_type == "ByteLevel" && last) {
      steps.push_back(parse_byte_level(file, list[i], item_at));
    } else if (item_type == "ByteLevel" || item_type == "Split") {
      file.fail(item_at + ".type",
                item_type.dump() + " is supported only as " +
                    (item_type == "Split" ? "a step before ByteLevel" : "the last step"));
    } else {
      file.unsupported(item_at + ".type", item_type);
    }
  }
  if (list.back()["type"] != "ByteLevel")
    file.fail(at + ".pretokenizers", "must end with ByteLevel");
  return steps;
}

void check_model_options(const TokenizerJson& file, const Json& model) {
  const Json& type = file.member(model, "model", "type");
  if (type != "BPE") file.unsupported("model.type", type);
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    file.unsupported("model.dropout", model["dropout"]);
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(affix) && !model[affix].is_null() && model[affix] != "") {
      file.unsupported(std::string("model.") + affix, model[affix]);
    }
  }
  if (file.flag(model, "model", "byte_fallback", false))
    file.fail("model.byte_fallback", "true is not supported");
}

std::vector<std::pair<std::string, std::string>> parse_merges(const TokenizerJson& file,
                                                              const Json& merges) {
  if (!merges.is_array()) file.fail("model.merges", "is not a list");
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& merge = merges[i];
    if (merge.is_string()) {  // "left right"
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        file.fail(TRAINER_STR("model.merges[" << i << "]"),
                  merge.dump() + " is not two tokens and one space");
      }
      pairs.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      pairs.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      file.fail(TRAINER_STR("model.merges[" << i << "]"),
                merge.dump() + " is not a pair of tokens");
    }
  }
  return pairs;
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const TokenizerSpec& spec) {
  const TokenizerJson file(spec.tokenizer_file);
  Json root;
  try {
    root = Json::parse(read_tokenizer_file("--tokenizer-file", spec.tokenizer_file));
  } catch (const Json::exception& error) {
    throw runtime::InputError(TRAINER_STR(file.path() << ": not valid JSON: " << error.what()));
  }
  std::shared_ptr<const NfcNormalizer> normalizer;
  if (root.contains("normalizer") && !root["normalizer"].is_null()) {
    const Json type = root["normalizer"].value("type", Json());
    if (type != "NFC") file.unsupported("normalizer.type", type);
    normalizer = std::make_shared<const NfcNormalizer>();
  }
  const Json& model = file.member(root, "", "model");
  check_model_options(file, model);
  const Json& vocab_json = file.member(model, "model", "vocab");
  if (!vocab_json.is_object()) file.fail("model.vocab", "is not an object of token -> id");
  StringMap<int32_t> vocab;
  vocab.reserve(vocab_json.size());
  int64_t max_id = 0;
  for (const auto& [token, id] : vocab_json.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      file.fail("model.vocab[\"" + token + "\"]", id.dump() + " is not an id in [0, 2^31)");
    }
    vocab.emplace(token, id.get<int32_t>());
    max_id = std::max<int64_t>(max_id, id.get<int64_t>());
  }
  BpeTokenizerParts parts;
  parts.token_bytes = byte_level_token_bytes_table(vocab);
  parts.normalizer = std::move(normalizer);
  parts.steps = parse_pre_tokenizer(file, root);
  parts.model = byte_level_model(vocab, parse_merges(file, file.member(model, "model", "merges")),
                                 file.flag(model, "model", "ignore_merges", false), file.path(),
                                 merges_origin);

  // Special added tokens are ids only: their text in a document is plain text. Non-special ones
  // are matched in the text before pre-tokenization, as Hugging Face does (without its lstrip,
  // rstrip and single_word options, which are refused).
  StringMap<int32_t> special_ids;
  const Json added = root.value("added_tokens", Json::array());
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string at = TRAINER_STR("added_tokens[" << i << "]");
    const Json& id = file.member(added[i], at, "id");
    const Json& content = file.member(added[i], at, "content");
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX ||
        !content.is_string() || content.get_ref<const std::string&>().empty()) {
      file.fail(at, "needs an integer id and a non-empty string content");
    }
    // Hugging Face gives an added token that is already a vocabulary token that token's id.
    const std::string& text = content.get_ref<const std::string&>();
    const auto in_vocab = vocab.find(text);
    const int32_t token_id = in_vocab != vocab.end() ? in_vocab->second : id.get<int32_t>();
    max_id = std::max<int64_t>(max_id, token_id);
    // Hugging Face's ByteLevel decoder maps added tokens as any other: byte characters to their
    // bytes, and a token with a character outside that alphabet to its UTF-8 text.
    std::string token_bytes;
    parts.token_bytes.set(token_id,
                          byte_level_token_bytes(text, &token_bytes) ? token_bytes : text);
    if (file.flag(added[i], at, "special", false)) {
      special_ids.emplace(text, token_id);
      continue;
    }
    for (const char* option : {"lstrip", "rstrip", "single_word"}) {
      if (file.flag(added[i], at, option, false)) {
        file.fail(at + "." + option, "true is not supported (added token " + content.dump() + ")");
      }
    }
    parts.matched_tokens.push_back({text, token_id, file.flag(added[i], at, "normalized", true)});
  }

  TokenizerIdentity& identity = parts.identity;
  identity.kind = "hf";
  identity.files = {digest_file(spec.tokenizer_file)};
  for (const PreTokenizeStep& step : parts.steps) {
    if (step.pattern)
      identity.split_pattern +=
          (identity.split_pattern.empty() ? "" : " ; ") + step.pattern->pattern();
  }
  identity.eod_id = spec.eod_id;
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"}) {
    if (identity.eod_id) break;
    if (const auto found = special_ids.find(name); found != special_ids.end()) {
      identity.eod_id = found->second;
    } else if (const auto in_vocab = vocab.find(name); in_vocab != vocab.end()) {
      identity.eod_id = in_vocab->second;
    }
  }
  if (identity.eod_id) max_id = std::max<int64_t>(max_id, *identity.eod_id);
  identity.vocab_size = max_id + 1;
  if (identity.eod_id && !parts.token_bytes.has(*identity.eod_id))
    parts.token_bytes.set(*identity.eod_id, kEndOfTextName);
  return make_bpe_tokenizer(std::move(parts));
}

}  // namespace trainer::tokenizer
