// `trainer prepare-data`: text files through the byte tokenizer into a dataset that
// reads back exactly, the synthetic path, and command-line errors naming flag and value.
#include <gtest/gtest.h>

#include <filesystem>

#include "data_test_util.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/prepare_data.h"
#include "trainer/data/synthetic.h"

namespace trainer {
namespace {

using testing::input_error_of;
using testing::ScratchDir;
using testing::write_text;

// Runs prepare-data, returning its stdout.
std::string run(const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  int code = -1;
  try {
    code = run_prepare_data(args);
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(code, 0);
  return out;
}

std::vector<std::vector<int32_t>> documents_of(const std::string& prefix) {
  IndexedDataset dataset(prefix);
  std::vector<std::vector<int32_t>> documents;
  int64_t begin = 0;
  for (const int32_t length : dataset.sequence_lengths()) {
    std::vector<int32_t> tokens(length);
    dataset.read_tokens(begin, length, tokens.data());
    documents.push_back(tokens);
    begin += length;
  }
  return documents;
}

std::vector<int32_t> bytes_of(const std::string& text, bool eod) {
  std::vector<int32_t> tokens;
  for (const char byte : text) tokens.push_back(static_cast<unsigned char>(byte));
  if (eod) tokens.push_back(kEndOfDocumentToken);
  return tokens;
}

TEST(PrepareData, EachFileIsADocument) {
  ScratchDir dir;
  write_text(dir.path("a.txt"), "hello\nworld\n");
  write_text(dir.path("b.txt"), std::string("caf\xc3\xa9\0x", 7));
  const std::string prefix = dir.path("out/nested/corpus");  // directories are created
  const std::string out = run({"--input", dir.path("a.txt"), "--input", dir.path("b.txt"),
                               "--output-prefix", prefix, "--append-eod"});
  EXPECT_NE(out.find("2 documents, 21 tokens (uint16)"), std::string::npos) << out;
  EXPECT_NE(out.find(prefix + ".bin"), std::string::npos) << out;
  const auto documents = documents_of(prefix);
  ASSERT_EQ(documents.size(), 2u);
  EXPECT_EQ(documents[0], bytes_of("hello\nworld\n", true));
  EXPECT_EQ(documents[1], bytes_of(std::string("caf\xc3\xa9\0x", 7), true));
  EXPECT_EQ(documents[1][3], 0xc3);  // bytes are unsigned token ids
  EXPECT_EQ(IndexedDataset(prefix).dtype(), TokenDType::uint16);
}

TEST(PrepareData, SplitLinesDropsNewlinesAndEmptyLines) {
  ScratchDir dir;
  write_text(dir.path("lines.txt"), "first line\n\nsecond\nlast without newline");
  write_text(dir.path("more.txt"), "\nx\n");
  const std::string prefix = dir.path("lines");
  const std::string out =
      run({"--split-lines", "--input=" + dir.path("lines.txt"), "--input", dir.path("more.txt"),
           "--output-prefix", prefix, "--append-eod", "--dtype", "int32"});
  EXPECT_NE(out.find("4 documents"), std::string::npos) << out;
  const auto documents = documents_of(prefix);
  ASSERT_EQ(documents.size(), 4u);
  EXPECT_EQ(documents[0], bytes_of("first line", true));
  EXPECT_EQ(documents[1], bytes_of("second", true));
  EXPECT_EQ(documents[2], bytes_of("last without newline", true));
  EXPECT_EQ(documents[3], bytes_of("x", true));
  EXPECT_EQ(IndexedDataset(prefix).dtype(), TokenDType::int32);

  run({"--split-lines", "--input", dir.path("lines.txt"), "--output-prefix", prefix});
  const auto plain = documents_of(prefix);
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[1], bytes_of("second", false));
}

TEST(PrepareData, SyntheticWritesTheCorpusAndItsEntropy) {
  ScratchDir dir;
  const std::string prefix = dir.path("synthetic/markov");
  const std::string out =
      run({"--synthetic", "--output-prefix", prefix, "--num-tokens", "50000", "--seed", "77",
           "--alphabet", "20", "--branching", "3", "--uniform-mix", "0.05"});
  SyntheticCorpusSpec spec;
  spec.num_tokens = 50'000;
  spec.seed = 77;
  spec.alphabet = 20;
  spec.branching = 3;
  spec.uniform_mix = 0.05;
  const SyntheticCorpus expected = make_synthetic_corpus(spec);
  const auto documents = documents_of(prefix);
  ASSERT_EQ(documents.size(), 1u);
  EXPECT_EQ(documents[0], expected.tokens);
  SyntheticEntropy entropy;
  ASSERT_TRUE(read_synthetic_metadata(prefix, &entropy));
  EXPECT_EQ(entropy.rate, expected.entropy.rate);
  EXPECT_EQ(entropy.order1, expected.entropy.order1);
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%.6f", expected.entropy.rate);
  EXPECT_NE(out.find(std::string("entropy rate H = ") + rate), std::string::npos) << out;
  EXPECT_NE(out.find("(H1 + (S - 1) * H) / S"), std::string::npos) << out;
  EXPECT_NE(out.find("50000 tokens"), std::string::npos) << out;
}

TEST(PrepareData, HelpPrintsUsage) {
  const std::string out = run({"--help"});
  EXPECT_EQ(out, prepare_data_usage());
  for (const char* flag :
       {"--input", "--output-prefix", "--append-eod", "--dtype", "--split-lines", "--synthetic",
        "--num-tokens", "--seed", "--alphabet", "--branching", "--uniform-mix"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  }
}

TEST(PrepareData, CommandLineErrorsNameFlagAndValue) {
  ScratchDir dir;
  write_text(dir.path("a.txt"), "abc");
  const std::string in = dir.path("a.txt"), prefix = dir.path("p");
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> pieces;
  };
  const std::vector<Case> cases = {
      {{"--input", in, "--output-prefix", prefix, "--shuffle"}, {"unknown flag", "--shuffle"}},
      {{"--input", in}, {"--output-prefix is required"}},
      {{"--input", dir.path("missing.txt"), "--output-prefix", prefix},
       {"--input", dir.path("missing.txt")}},
      {{"--output-prefix", prefix}, {"no --input"}},
      {{"--output-prefix", prefix, "--input"}, {"--input needs a value"}},
      {{"--input", "--output-prefix", prefix}, {"--input needs a value"}},
      {{"--input", in, "--output-prefix", prefix, "--dtype", "float32"}, {"--dtype", "float32"}},
      {{"--synthetic", "--output-prefix", prefix, "--num-tokens", "12abc"},
       {"--num-tokens", "12abc"}},
      {{"--synthetic", "--output-prefix", prefix, "--num-tokens", "2"}, {"--num-tokens", "\"2\""}},
      {{"--synthetic", "--output-prefix", prefix, "--seed", "-1"}, {"--seed", "-1"}},
      {{"--synthetic", "--output-prefix", prefix, "--uniform-mix", "0"},
       {"--uniform-mix", "\"0\""}},
      {{"--synthetic", "--output-prefix", prefix, "--uniform-mix", "x"},
       {"--uniform-mix", "\"x\""}},
      {{"--synthetic", "--output-prefix", prefix, "--alphabet", "200"}, {"alphabet = 200"}},
      {{"--input", in, "--output-prefix", prefix, "--seed", "3"}, {"--seed needs --synthetic"}},
      {{"--synthetic", "--input", in, "--output-prefix", prefix}, {"--synthetic takes no --input"}},
      {{"--input", in, "--output-prefix", prefix, "--append-eod=yes"}, {"--append-eod", "yes"}},
  };
  for (const Case& c : cases) {
    std::string joined;
    for (const auto& arg : c.args) joined += arg + " ";
    const std::string message = input_error_of([&] { run(c.args); });
    for (const auto& piece : c.pieces) {
      EXPECT_NE(message.find(piece), std::string::npos) << joined << "-> " << message;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(prefix + ".idx"));
  // A missing input is found before anything is created.
  input_error_of([&] {
    run({"--input", in, "--input", dir.path("gone.txt"), "--output-prefix", dir.path("new/p")});
  });
  EXPECT_FALSE(std::filesystem::exists(dir.path("new")));
}

}  // namespace
}  // namespace trainer
