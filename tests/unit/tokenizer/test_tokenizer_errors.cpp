// Tokenizer files that cannot be loaded exactly: each is an InputError naming the file and the
// component (JSON path), line or flag, never a tokenizer that would give other ids.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"
#include "trainer/tokenizer/tokenizer.h"

namespace trainer::tokenizer {
namespace {

using testing::fixture;
using testing::input_error_of;
using testing::ScratchFile;

// The small GPT-2 tokenizer.json with one member replaced (a JSON pointer, e.g. "/normalizer").
std::string edited_tokenizer_json(const std::string& pointer, const nlohmann::json& value) {
  nlohmann::json root =
      nlohmann::json::parse(testing::read_text(fixture("small_gpt2_tokenizer.json")));
  root[nlohmann::json::json_pointer(pointer)] = value;
  return root.dump();
}

std::string hf_error(const std::string& pointer, const nlohmann::json& value) {
  const ScratchFile file("tokenizer.json", edited_tokenizer_json(pointer, value));
  TokenizerSpec spec;
  spec.kind = TokenizerKind::hf;
  spec.tokenizer_file = file.path();
  const std::string message = input_error_of([&] { load_tokenizer(spec); });
  EXPECT_NE(message.find(file.path()), std::string::npos) << message;
  return message;
}

TEST(TokenizerErrors, UnsupportedTokenizerJsonComponentsNameTheirPath) {
  struct Case {
    std::string pointer;
    std::string value;  // JSON text
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"/normalizer", R"({"type": "NFKC"})", R"(normalizer.type "NFKC" is not supported)"},
      {"/pre_tokenizer", R"({"type": "Whitespace"})",
       R"(pre_tokenizer.type "Whitespace" is not supported)"},
      {"/pre_tokenizer",
       R"({"type": "Sequence", "pretokenizers": [{"type": "Digits"}, {"type": "ByteLevel"}]})",
       R"(pre_tokenizer.pretokenizers[0].type "Digits" is not supported)"},
      {"/pre_tokenizer",
       R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\d"},
           "behavior": "Removed", "invert": false}, {"type": "ByteLevel"}]})",
       R"(pre_tokenizer.pretokenizers[0].behavior "Removed" is not supported)"},
      {"/pre_tokenizer", "null", "pre_tokenizer is null"},
      {"/model/type", R"("WordPiece")", R"(model.type "WordPiece" is not supported)"},
      {"/model/dropout", "0.1", "model.dropout 0.1 is not supported"},
      {"/model/continuing_subword_prefix", R"("##")",
       R"(model.continuing_subword_prefix "##" is not supported)"},
      {"/model/byte_fallback", "true", "model.byte_fallback true is not supported"},
      {"/model/merges/5", R"("nosuchtoken x")",
       R"(model.merges[5]: token "nosuchtoken" is not in the vocabulary)"},
      {"/model/merges/6", "42", "model.merges[6] 42 is not a pair of tokens"},
      {"/added_tokens/1/lstrip", "true",
       R"(added_tokens[1].lstrip true is not supported (added token "<tool_call>"))"},
      {"/added_tokens/2/content", R"("")", "added_tokens[2] needs an integer id and a non-empty"},
  };
  for (const Case& c : cases) {
    const std::string message = hf_error(c.pointer, nlohmann::json::parse(c.value));
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.pointer << " -> " << message;
  }
}

TEST(TokenizerErrors, Gpt2FilesMissingOrMalformed) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::gpt2;
  spec.vocab_file = fixture("small_gpt2_vocab.json");
  spec.merge_file = "/nonexistent/merges.txt";
  std::string message = input_error_of([&] { load_tokenizer(spec); });
  EXPECT_NE(message.find("--merge-file \"/nonexistent/merges.txt\": cannot open"),
            std::string::npos)
      << message;

  const ScratchFile merges("merges.txt", "#version: 0.2\n\xc4\xa0 t\nthree token s\n");
  spec.merge_file = merges.path();
  message = input_error_of([&] { load_tokenizer(spec); });
  EXPECT_NE(message.find(merges.path() + " line 3: \"three token s\""), std::string::npos)
      << message;

  const ScratchFile vocab("vocab.json", "{\"a\": 0, \"b\": -4}");
  spec.vocab_file = vocab.path();
  message = input_error_of([&] { load_tokenizer(spec); });
  EXPECT_NE(message.find("token \"b\" has id -4"), std::string::npos) << message;
}

TEST(TokenizerErrors, TiktokenFileAndFlags) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::tiktoken;
  spec.split_pattern = "cl100k";
  spec.tokenizer_file = fixture("small_cl100k.tiktoken");
  std::string message = input_error_of([&] { load_tokenizer(spec); });
  EXPECT_NE(message.find("needs --eod-id"), std::string::npos) << message;

  spec.eod_id = 5;
  message = input_error_of([&] { load_tokenizer(spec); });
  EXPECT_NE(message.find("--eod-id 5 is the rank of a mergeable token"), std::string::npos)
      << message;

  const ScratchFile ranks("bad.tiktoken", "IQ== 0\nIg== 1\nnot-base64! 2\n");
  spec.tokenizer_file = ranks.path();
  spec.eod_id = 100;
  message = input_error_of([&] { load_tokenizer(spec); });
  EXPECT_NE(message.find(ranks.path() + " line 3"), std::string::npos) << message;

  const ScratchFile few("few.tiktoken", "IQ== 0\nIg== 1\n");
  spec.tokenizer_file = few.path();
  message = input_error_of([&] { load_tokenizer(spec); });
  EXPECT_NE(message.find("no token for the single byte 0"), std::string::npos) << message;
}

TEST(TokenizerErrors, NotASentencePieceModel) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::sentencepiece;
  spec.tokenizer_file = fixture("corpus.jsonl");
  const std::string message = input_error_of([&] { load_tokenizer(spec); });
  EXPECT_NE(message.find("corpus.jsonl: not a SentencePiece model"), std::string::npos) << message;
}

TEST(TokenizerErrors, UnknownKind) {
  const std::string message = input_error_of([] { parse_kind("wordpiece"); });
  EXPECT_NE(message.find("--tokenizer \"wordpiece\""), std::string::npos) << message;
}

}  // namespace
}  // namespace trainer::tokenizer
