// The tokenizer of <prefix>.json as the trainer reads it: written by prepare-data (and by the
// synthetic corpus), read back exactly, absent or malformed files, and tokenizer identity.
#include <gtest/gtest.h>

#include "data_test_util.h"
#include "trainer/data/dataset_metadata.h"
#include "trainer/data/synthetic.h"

namespace trainer {
namespace {

using testing::input_error_of;
using testing::ScratchDir;
using testing::write_text;

tokenizer::TokenizerIdentity gpt2_identity() {
  tokenizer::TokenizerIdentity identity;
  identity.kind = "gpt2";
  identity.files = {{"/x/vocab.json", "aa11"}, {"/x/merges.txt", "bb22"}};
  identity.vocab_size = 50257;
  identity.eod_id = 50256;
  identity.split_pattern = "'s|'t| ?\\p{L}+";
  return identity;
}

void expect_same_identity(const tokenizer::TokenizerIdentity& a,
                          const tokenizer::TokenizerIdentity& b) {
  EXPECT_EQ(a.kind, b.kind);
  ASSERT_EQ(a.files.size(), b.files.size());
  for (size_t i = 0; i < a.files.size(); ++i) {
    EXPECT_EQ(a.files[i].path, b.files[i].path);
    EXPECT_EQ(a.files[i].sha256, b.files[i].sha256);
  }
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.eod_id, b.eod_id);
  EXPECT_EQ(a.split_pattern, b.split_pattern);
}

TEST(DatasetTokenizer, ReadsWhatPrepareDataWrote) {
  ScratchDir dir;
  const std::string prefix = dir.path("web");
  DatasetMetadata metadata;
  metadata.tokenizer = gpt2_identity();
  metadata.dtype = "uint16";
  DatasetMetadataFile file(prefix, metadata);
  file.commit();
  const auto read = read_dataset_tokenizer(prefix);
  ASSERT_TRUE(read.has_value());
  expect_same_identity(*read, gpt2_identity());
}

TEST(DatasetTokenizer, TheSyntheticCorpusNamesTheByteTokenizer) {
  ScratchDir dir;
  const std::string prefix = dir.path("synthetic");
  write_synthetic_metadata(prefix, SyntheticCorpusSpec{}, SyntheticEntropy{1, 1, 1});
  const auto read = read_dataset_tokenizer(prefix);
  ASSERT_TRUE(read.has_value());
  expect_same_identity(*read, synthetic_tokenizer());
  EXPECT_EQ(read->kind, "byte");
  EXPECT_EQ(read->vocab_size, 256);
  EXPECT_FALSE(read->eod_id.has_value());
  SyntheticEntropy entropy;
  EXPECT_TRUE(read_synthetic_metadata(prefix, &entropy));  // the floor is still read
}

TEST(DatasetTokenizer, NoFileOrNoTokenizerIsUnknown) {
  ScratchDir dir;
  EXPECT_FALSE(read_dataset_tokenizer(dir.path("plain")).has_value());
  write_text(dir.path("old.json"), "{\"generator\": \"order2_markov\", \"seed\": 1}");
  EXPECT_FALSE(read_dataset_tokenizer(dir.path("old")).has_value());
}

TEST(DatasetTokenizer, MalformedFilesNameTheFileAndField) {
  ScratchDir dir;
  const std::string prefix = dir.path("bad");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"tokenizer\": ", "malformed JSON"},
      {"[1]", "not a JSON object"},
      {"{\"tokenizer\": 3}", "\"tokenizer\" is not a JSON object"},
      {"{\"tokenizer\": {\"files\": [], \"vocab_size\": 3}}", "\"tokenizer.kind\" is missing"},
      {"{\"tokenizer\": {\"kind\": \"byte\", \"files\": [], \"vocab_size\": \"many\"}}",
       "\"tokenizer.vocab_size\" is \"many\", expected an integer"},
      {"{\"tokenizer\": {\"kind\": \"byte\", \"files\": [], \"vocab_size\": 0}}",
       "\"tokenizer.vocab_size\" is 0"},
      {"{\"tokenizer\": {\"kind\": \"byte\", \"files\": [1], \"vocab_size\": 9}}",
       "\"tokenizer.files\" holds 1"},
      {"{\"tokenizer\": {\"kind\": \"byte\", \"files\": [], \"vocab_size\": 9, \"eod_id\": 9}}",
       "\"tokenizer.eod_id\" is 9, expected null or an id below vocab_size 9"},
  };
  for (const auto& [text, defect] : cases) {
    write_text(prefix + ".json", text);
    const std::string message = input_error_of([&] { read_dataset_tokenizer(prefix); });
    EXPECT_NE(message.find(prefix + ".json"), std::string::npos) << message;
    EXPECT_NE(message.find(defect), std::string::npos) << text << " -> " << message;
  }
}

TEST(DatasetTokenizer, SameTokenizerMeansSameKindFilesAndSplit) {
  const tokenizer::TokenizerIdentity gpt2 = gpt2_identity();
  tokenizer::TokenizerIdentity other = gpt2;
  other.eod_id = 7;  // --eod-id changes no id of the text
  other.vocab_size = 50300;
  other.files[0].path = "/elsewhere/vocab.json";  // the same file, copied
  EXPECT_TRUE(same_tokenizer(gpt2, other));
  other = gpt2;
  other.files[1].sha256 = "cc33";
  EXPECT_FALSE(same_tokenizer(gpt2, other));
  other = gpt2;
  other.kind = "hf";
  EXPECT_FALSE(same_tokenizer(gpt2, other));
  other = gpt2;
  other.split_pattern = "o200k";
  EXPECT_FALSE(same_tokenizer(gpt2, other));
  other = gpt2;
  other.files.pop_back();
  EXPECT_FALSE(same_tokenizer(gpt2, other));
  EXPECT_EQ(
      describe_tokenizer(gpt2),
      "gpt2 (vocab_size 50257, eod_id 50256; vocab.json sha256 aa11, merges.txt sha256 bb22)");
}

}  // namespace
}  // namespace trainer
