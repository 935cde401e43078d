// Ids equal to the reference tokenizers' on every document of the fixture corpus: Hugging Face
// tokenizers (GPT-2 files, tokenizer.json with add_prefix_space, a Llama-3-style Split +
// ByteLevel tokenizer.json), tiktoken (cl100k ranks) and python3-sentencepiece.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"
#include "trainer/tokenizer/tokenizer.h"

namespace trainer::tokenizer {
namespace {

using testing::corpus_documents;
using testing::fixture;
using testing::reference_ids;

// Encodes every corpus document with a fresh session and compares with the reference; returns
// the ids compared.
size_t expect_reference_ids(const Tokenizer& tokenizer, const std::string& file,
                            const std::string& name) {
  const std::vector<std::string> documents = corpus_documents();
  const std::vector<std::vector<int32_t>> expected = reference_ids(file, name);
  EXPECT_EQ(documents.size(), expected.size());
  const auto session = tokenizer.new_session();
  size_t compared = 0;
  for (size_t i = 0; i < documents.size() && i < expected.size(); ++i) {
    std::vector<int32_t> ids;
    session->encode(documents[i], &ids);
    EXPECT_EQ(ids, expected[i]) << name << " document " << i << ": " << documents[i];
    compared += expected[i].size();
  }
  // Encoding again hits the piece cache: the same ids.
  std::vector<int32_t> first, again;
  session->encode(documents[0], &first);
  session->encode(documents[0], &again);
  EXPECT_EQ(first, again);
  return compared;
}

TEST(ReferenceIds, Gpt2VocabAndMergesMatchHuggingFace) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::gpt2;
  spec.vocab_file = fixture("small_gpt2_vocab.json");
  spec.merge_file = fixture("small_gpt2_merges.txt");
  const auto tokenizer = load_tokenizer(spec);
  EXPECT_GT(expect_reference_ids(*tokenizer, "expected_ids_small.json", "small_gpt2"), 1500u);
  EXPECT_EQ(tokenizer->identity().eod_id, 2256);  // <|endoftext|> after 256 bytes + 2000 merges
  EXPECT_EQ(tokenizer->identity().vocab_size, 2257);
  ASSERT_EQ(tokenizer->identity().files.size(), 2u);
  EXPECT_EQ(tokenizer->identity().files[0].sha256.size(), 64u);
}

TEST(ReferenceIds, TokenizerJsonWithPrefixSpaceMatchesHuggingFace) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::hf;
  spec.tokenizer_file = fixture("small_gpt2_tokenizer.json");
  const auto tokenizer = load_tokenizer(spec);
  expect_reference_ids(*tokenizer, "expected_ids_small.json", "small_gpt2_hf_prefix_space");
  EXPECT_EQ(tokenizer->identity().eod_id, 2256);  // the special added token <|endoftext|>
}

TEST(ReferenceIds, NfcAndAddedTokensMatchHuggingFace) {
  // Qwen2 style: NFC, Split with single digits, ByteLevel without its regex; one added token
  // matched in the raw text, one after NFC (it is also a vocabulary token: that id wins).
  TokenizerSpec spec;
  spec.kind = TokenizerKind::hf;
  spec.tokenizer_file = fixture("small_qwen2_style_tokenizer.json");
  const auto tokenizer = load_tokenizer(spec);
  expect_reference_ids(*tokenizer, "expected_ids_small.json", "small_qwen2_style_hf");
  std::vector<int32_t> ids;
  tokenizer->new_session()->encode("n\xcc\x83 a\xcc\x88", &ids);  // n + U+0303, a + U+0308
  EXPECT_EQ(ids, (std::vector<int32_t>{173, 220, 2257}));         // NFC "ñ" is byte 0xF1's token
}

TEST(ReferenceIds, TiktokenRanksMatchTiktoken) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::tiktoken;
  spec.tokenizer_file = fixture("small_cl100k.tiktoken");
  spec.split_pattern = "cl100k";
  spec.eod_id = 3000;
  const auto tokenizer = load_tokenizer(spec);
  expect_reference_ids(*tokenizer, "expected_ids_small.json", "small_cl100k_tiktoken");
  EXPECT_EQ(tokenizer->identity().vocab_size, 3001);
}

TEST(ReferenceIds, Llama3StyleSplitSequenceMatchesHuggingFace) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::hf;
  spec.tokenizer_file = fixture("small_llama3_style_tokenizer.json");
  const auto tokenizer = load_tokenizer(spec);
  expect_reference_ids(*tokenizer, "expected_ids_small.json", "small_llama3_style_hf");
  EXPECT_FALSE(tokenizer->identity().eod_id);  // none in the file: --eod-id must name it
}

TEST(ReferenceIds, SentencePieceMatchesPython) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::sentencepiece;
  spec.tokenizer_file = fixture("spm_tiny.model");
  const auto tokenizer = load_tokenizer(spec);
  expect_reference_ids(*tokenizer, "expected_ids_sentencepiece.json", "sentencepiece");
  EXPECT_EQ(tokenizer->identity().eod_id, 2);
  EXPECT_EQ(tokenizer->identity().vocab_size, 700);
}

TEST(ReferenceIds, SpecialTokenTextIsPlainText) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::gpt2;
  spec.vocab_file = fixture("small_gpt2_vocab.json");
  spec.merge_file = fixture("small_gpt2_merges.txt");
  const auto tokenizer = load_tokenizer(spec);
  std::vector<int32_t> ids;
  tokenizer->new_session()->encode("a<|endoftext|>b", &ids);
  EXPECT_GT(ids.size(), 3u);
  for (const int32_t id : ids) EXPECT_NE(id, *tokenizer->identity().eod_id);
}

TEST(ReferenceIds, ByteTokenizerIsEachByte) {
  const auto tokenizer = load_tokenizer(TokenizerSpec{});
  std::vector<int32_t> ids;
  tokenizer->new_session()->encode(std::string("a\xff\0", 3), &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{'a', 255, 0}));
  EXPECT_EQ(tokenizer->identity().eod_id, 256);
  EXPECT_FALSE(tokenizer->requires_utf8());
}

}  // namespace
}  // namespace trainer::tokenizer
