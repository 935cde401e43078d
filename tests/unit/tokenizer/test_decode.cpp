// Decoding: decode(encode(text)) gives the text back (SentencePiece: its normalized text; the
// NFC and prefix-space tokenizer.json files are checked against Hugging Face's decode), and the
// decoded ids of the committed references equal the reference tokenizers' own
// decode (Hugging Face tokenizers, tiktoken, python3-sentencepiece; data/expected_texts_*.json,
// made by make_reference_texts.mjs and make_sentencepiece_texts.py), cut UTF-8 characters
// included; valid_utf8 replaces as Python does.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"
#include "trainer/tokenizer/tokenizer.h"

namespace trainer::tokenizer {
namespace {

using testing::corpus_documents;
using testing::fixture;
using testing::reference_ids;

TokenizerSpec spec_of(TokenizerKind kind, const std::string& file = "") {
  TokenizerSpec spec;
  spec.kind = kind;
  if (kind == TokenizerKind::gpt2) {
    spec.vocab_file = fixture("small_gpt2_vocab.json");
    spec.merge_file = fixture("small_gpt2_merges.txt");
  } else if (kind == TokenizerKind::tiktoken) {
    spec.tokenizer_file = fixture("small_cl100k.tiktoken");
    spec.split_pattern = "cl100k";
    spec.eod_id = 3000;
  } else if (kind != TokenizerKind::byte) {
    spec.tokenizer_file = fixture(file);
  }
  return spec;
}

std::vector<int32_t> encode(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids;
  tokenizer.new_session()->encode(text, &ids);
  return ids;
}

// decode(encode(text)) == expected(text) on every corpus document; returns the documents checked.
template <typename Expected>
size_t expect_round_trip(const Tokenizer& tokenizer, Expected&& expected) {
  size_t checked = 0;
  for (const std::string& text : corpus_documents()) {
    EXPECT_EQ(tokenizer.decode(encode(tokenizer, text)), expected(text))
        << tokenizer.identity().kind << ": " << text;
    ++checked;
  }
  return checked;
}

const auto same = [](const std::string& text) { return text; };

TEST(Decode, ByteGpt2TiktokenAndSplitTokenizerJsonGiveTheTextBack) {
  for (const TokenizerSpec& spec :
       {spec_of(TokenizerKind::byte), spec_of(TokenizerKind::gpt2),
        spec_of(TokenizerKind::tiktoken),
        spec_of(TokenizerKind::hf, "small_llama3_style_tokenizer.json")}) {
    EXPECT_GT(expect_round_trip(*load_tokenizer(spec), same), 30u);
  }
}

TEST(Decode, SentencePieceGivesItsNormalizedTextBack) {
  // The committed model normalizes by the identity but, as SentencePiece does by default, removes
  // extra spaces: runs of spaces become one, and leading and trailing ones go.
  const auto tokenizer = load_tokenizer(spec_of(TokenizerKind::sentencepiece, "spm_tiny.model"));
  expect_round_trip(*tokenizer, [](const std::string& text) {
    std::string collapsed;
    for (const char c : text)
      if (c != ' ' || (!collapsed.empty() && collapsed.back() != ' ')) collapsed += c;
    if (!collapsed.empty() && collapsed.back() == ' ') collapsed.pop_back();
    return collapsed;
  });
}

TEST(Decode, EndOfDocumentIdsDecodeToTheirName) {
  const std::vector<int32_t> eod_only = {
      *load_tokenizer(spec_of(TokenizerKind::byte))->identity().eod_id};
  EXPECT_EQ(load_tokenizer(spec_of(TokenizerKind::byte))->decode(eod_only), "<|endoftext|>");
  const auto tiktoken = load_tokenizer(spec_of(TokenizerKind::tiktoken));
  const std::vector<int32_t> ids = {3000};
  EXPECT_EQ(tiktoken->decode(ids), "<|endoftext|>");
  const auto gpt2 = load_tokenizer(spec_of(TokenizerKind::gpt2));
  const std::vector<int32_t> gpt2_eod = {2256};
  EXPECT_EQ(gpt2->decode(gpt2_eod), "<|endoftext|>");  // vocab.json's own token
}

TEST(Decode, IdsWithoutATokenAreInputErrors) {
  const std::vector<int32_t> outside = {5000};
  for (const TokenizerSpec& spec : {spec_of(TokenizerKind::byte), spec_of(TokenizerKind::gpt2),
                                    spec_of(TokenizerKind::tiktoken),
                                    spec_of(TokenizerKind::sentencepiece, "spm_tiny.model")}) {
    const auto tokenizer = load_tokenizer(spec);
    const std::string message = testing::input_error_of([&] { tokenizer->decode(outside); });
    EXPECT_NE(message.find("5000"), std::string::npos) << message;
  }
}

// Each reference member's ids, decoded (whole, and without the last id), against the
// reference decoder's text.
void expect_reference_texts(const Tokenizer& tokenizer, const std::string& ids_file,
                            const std::string& texts_file, const std::string& member) {
  const std::vector<std::vector<int32_t>> ids = reference_ids(ids_file, member);
  const nlohmann::json texts = nlohmann::json::parse(testing::read_text(fixture(texts_file)));
  const auto whole = texts.at(member).get<std::vector<std::string>>();
  const auto truncated = texts.at(member + "_truncated").get<std::vector<std::string>>();
  ASSERT_EQ(whole.size(), ids.size());
  size_t replaced = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(valid_utf8(tokenizer.decode(ids[i])), whole[i]) << member << " document " << i;
    const std::span<const int32_t> cut(ids[i].data(), ids[i].empty() ? 0 : ids[i].size() - 1);
    EXPECT_EQ(valid_utf8(tokenizer.decode(cut)), truncated[i]) << member << " cut " << i;
    replaced += truncated[i].find("\xEF\xBF\xBD") != std::string::npos;
  }
  if (member != "sentencepiece") {
    EXPECT_GT(replaced, 0u) << member << ": no cut character";
  }
}

TEST(Decode, MatchesHuggingFaceTiktokenAndSentencePieceDecoders) {
  expect_reference_texts(*load_tokenizer(spec_of(TokenizerKind::gpt2)), "expected_ids_small.json",
                         "expected_texts_small.json", "small_gpt2");
  for (const auto& [file, member] : std::vector<std::pair<std::string, std::string>>{
           {"small_gpt2_tokenizer.json", "small_gpt2_hf_prefix_space"},
           {"small_qwen2_style_tokenizer.json", "small_qwen2_style_hf"},
           {"small_llama3_style_tokenizer.json", "small_llama3_style_hf"}}) {
    expect_reference_texts(*load_tokenizer(spec_of(TokenizerKind::hf, file)),
                           "expected_ids_small.json", "expected_texts_small.json", member);
  }
  expect_reference_texts(*load_tokenizer(spec_of(TokenizerKind::tiktoken)),
                         "expected_ids_small.json", "expected_texts_small.json",
                         "small_cl100k_tiktoken");
  expect_reference_texts(*load_tokenizer(spec_of(TokenizerKind::sentencepiece, "spm_tiny.model")),
                         "expected_ids_sentencepiece.json", "expected_texts_sentencepiece.json",
                         "sentencepiece");
}

TEST(Decode, ValidUtf8ReplacesEachMaximalInvalidSubpart) {
  // Python: b"a\xe2\x82b\xff\xf0\x9f\x98\x80\xed\xa0\x80".decode("utf-8", "replace")
  EXPECT_EQ(valid_utf8("a\xE2\x82"
                       "b\xFF\xF0\x9F\x98\x80\xED\xA0\x80"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xF0\x9F\x98\x80\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(valid_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: two replacements
  EXPECT_EQ(valid_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
}

}  // namespace
}  // namespace trainer::tokenizer
