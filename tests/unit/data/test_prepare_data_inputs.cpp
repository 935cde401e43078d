// `trainer prepare-data` with real tokenizers and inputs: JSON Lines plain, .gz and .zst give the
// reference ids; bad lines, truncated files and a too-small --dtype are InputErrors that leave no
// output; the worker count does not change a byte; <prefix>.json names the tokenizer.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "data_test_util.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/prepare_data.h"
#include "trainer/data/synthetic.h"

namespace trainer {
namespace {

using testing::input_error_of;
using testing::read_bytes;
using testing::ScratchDir;
using testing::write_text;

std::string fixture(const std::string& name) {
  return std::string(TRAINER_SOURCE_DIR) + "/tests/unit/tokenizer/data/" + name;
}
std::string read_text(const std::string& path) {
  const auto bytes = read_bytes(path);
  return {bytes.begin(), bytes.end()};
}

// Runs prepare-data; returns its stdout (stderr, the progress, is left alone).
std::string run(std::vector<std::string> args) {
  ::testing::internal::CaptureStdout();
  int code = -1;
  try {
    code = run_prepare_data(args);
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  EXPECT_EQ(code, 0);
  return ::testing::internal::GetCapturedStdout();
}

std::vector<std::string> gpt2_flags() {
  return {"--tokenizer",  "gpt2",
          "--vocab-file", fixture("small_gpt2_vocab.json"),
          "--merge-file", fixture("small_gpt2_merges.txt")};
}
std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
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

void write_gzip(const std::string& path, const std::string& text) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  gzclose(file);
}
std::string zstd_of(const std::string& text) {
  std::string compressed(ZSTD_compressBound(text.size()), '\0');
  const size_t size =
      ZSTD_compress(compressed.data(), compressed.size(), text.data(), text.size(), 3);
  compressed.resize(size);
  return compressed;
}

// Only `kept` remain in the directory: no .bin/.idx/.json, no temporaries.
void expect_only(const ScratchDir& dir, const std::vector<std::string>& kept) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path(""))) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> expected = kept;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names, expected);
}

TEST(PrepareDataInputs, JsonLinesPlainGzipAndZstdGiveTheReferenceIds) {
  ScratchDir dir;
  const std::string corpus = read_text(fixture("corpus.jsonl"));
  write_text(dir.path("c.jsonl"), corpus);
  write_gzip(dir.path("c.jsonl.gz"), corpus);
  write_text(dir.path("c.jsonl.zst"), zstd_of(corpus));
  const auto expected =
      nlohmann::json::parse(read_text(fixture("expected_ids_small.json")))["small_gpt2"]
          .get<std::vector<std::vector<int32_t>>>();
  std::vector<unsigned char> first_bin;
  for (const char* name : {"c.jsonl", "c.jsonl.gz", "c.jsonl.zst"}) {
    const std::string prefix = dir.path(std::string("out_") + name);
    const std::string out =
        run(with(gpt2_flags(), {"--input", dir.path(name), "--output-prefix", prefix}));
    EXPECT_NE(out.find(std::to_string(expected.size()) + " documents"), std::string::npos) << out;
    EXPECT_EQ(documents_of(prefix), expected) << name;
    if (first_bin.empty()) first_bin = read_bytes(prefix + ".bin");
    EXPECT_EQ(read_bytes(prefix + ".bin"), first_bin) << name;
  }
}

TEST(PrepareDataInputs, MalformedLineNamesFileAndLineAndLeavesNoOutput) {
  ScratchDir dir;
  write_text(dir.path("d.jsonl"),
             "{\"text\": \"one\"}\n\n{\"text\": \"two\"}\n{\"text\": \"thr\n{\"text\": 4}\n");
  const auto args =
      with(gpt2_flags(), {"--input", dir.path("d.jsonl"), "--output-prefix", dir.path("out")});
  const std::string message = input_error_of([&] { run(args); });
  EXPECT_NE(message.find(dir.path("d.jsonl") + " line 4: malformed JSON"), std::string::npos)
      << message;
  expect_only(dir, {"d.jsonl"});

  // --skip-bad-lines: lines 4 (malformed) and 5 (text not a string) are counted, not written.
  run(with(args, {"--skip-bad-lines", "--append-eod"}));
  EXPECT_EQ(documents_of(dir.path("out")).size(), 2u);
  const auto metadata = nlohmann::json::parse(read_text(dir.path("out.json")));
  EXPECT_EQ(metadata["bad_lines"], 2);
  EXPECT_EQ(metadata["documents"], 2);
}

TEST(PrepareDataInputs, JsonKeyEscapesAndSurrogatePairs) {
  ScratchDir dir;
  write_text(
      dir.path("e.json"),
      "{\"content\": \"\\ud83d\\ude00 \\u00e9\\t\\\"q\\\"\\\\\\/\", \"text\": \"ignored\"}\n");
  run({"--input", dir.path("e.json"), "--json-key", "content", "--output-prefix", dir.path("out")});
  const std::string expected = "\xf0\x9f\x98\x80 \xc3\xa9\t\"q\"\\/";
  std::vector<int32_t> expected_ids;
  for (const char byte : expected) expected_ids.push_back(static_cast<unsigned char>(byte));
  EXPECT_EQ(documents_of(dir.path("out"))[0], expected_ids);
  write_text(dir.path("lone.jsonl"), "{\"text\": \"\\ud83d alone\"}\n");
  const std::string message = input_error_of([&] {
    run({"--input", dir.path("lone.jsonl"), "--output-prefix", dir.path("lone")});
  });
  EXPECT_NE(message.find("lone.jsonl line 1: malformed JSON"), std::string::npos) << message;
}

TEST(PrepareDataInputs, TruncatedCompressedFilesAreErrors) {
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "{\"text\": \"line " + std::to_string(i) + "\"}\n";
  const std::string zstd = zstd_of(text);
  write_text(dir.path("t.jsonl.zst"), zstd.substr(0, zstd.size() / 2));
  std::string message = input_error_of([&] {
    run({"--input", dir.path("t.jsonl.zst"), "--output-prefix", dir.path("out")});
  });
  EXPECT_NE(message.find(dir.path("t.jsonl.zst") + ": truncated Zstandard file"), std::string::npos)
      << message;
  write_gzip(dir.path("full.gz"), text);
  const std::string gzip = read_text(dir.path("full.gz"));
  write_text(dir.path("t.txt.gz"), gzip.substr(0, gzip.size() - 12));
  std::filesystem::remove(dir.path("full.gz"));
  message = input_error_of([&] {
    run({"--input", dir.path("t.txt.gz"), "--output-prefix", dir.path("out"), "--split-lines"});
  });
  EXPECT_NE(message.find(dir.path("t.txt.gz") + ": corrupt or truncated gzip"), std::string::npos)
      << message;
  expect_only(dir, {"t.jsonl.zst", "t.txt.gz"});
}

TEST(PrepareDataInputs, DtypeFollowsTheVocabulary) {
  ScratchDir dir;
  write_text(dir.path("a.txt"), "hello world");
  const std::vector<std::string> tiktoken = {
      "--tokenizer",     "tiktoken",       "--tokenizer-file", fixture("small_cl100k.tiktoken"),
      "--split-pattern", "cl100k",         "--eod-id",         "70000",
      "--input",         dir.path("a.txt")};
  const std::string message = input_error_of([&] {
    run(with(tiktoken, {"--output-prefix", dir.path("p"), "--dtype", "uint16"}));
  });
  EXPECT_NE(message.find(
                "--dtype uint16 holds ids below 65536, but the tiktoken tokenizer has 70001 ids"),
            std::string::npos)
      << message;
  expect_only(dir, {"a.txt"});
  run(with(tiktoken, {"--output-prefix", dir.path("p"), "--append-eod"}));
  EXPECT_EQ(IndexedDataset(dir.path("p")).dtype(), TokenDType::int32);
  EXPECT_EQ(documents_of(dir.path("p"))[0].back(), 70000);
  run(with(gpt2_flags(), {"--input", dir.path("a.txt"), "--output-prefix", dir.path("q")}));
  EXPECT_EQ(IndexedDataset(dir.path("q")).dtype(), TokenDType::uint16);
}

TEST(PrepareDataInputs, WorkerCountDoesNotChangeTheOutput) {
  ScratchDir dir;
  const std::string corpus = read_text(fixture("corpus.jsonl"));
  std::string big;
  while (big.size() < (size_t{5} << 20)) big += corpus;  // several batches per worker
  write_text(dir.path("big.jsonl"), big);
  write_text(dir.path("small.txt"), "a whole file\nas one document");
  std::vector<std::vector<unsigned char>> first;
  for (const char* workers : {"1", "2", "3"}) {
    const std::string prefix = dir.path(std::string("w") + workers);
    run(with(gpt2_flags(), {"--input", dir.path("big.jsonl"), "--input", dir.path("small.txt"),
                            "--output-prefix", prefix, "--append-eod", "--workers", workers}));
    std::vector<std::vector<unsigned char>> files = {read_bytes(prefix + ".bin"),
                                                     read_bytes(prefix + ".idx")};
    if (first.empty()) first = files;
    EXPECT_TRUE(files == first) << "--workers " << workers;
  }
  EXPECT_GT(first[0].size(), size_t{1} << 20);
}

TEST(PrepareDataInputs, MetadataNamesTheTokenizer) {
  ScratchDir dir;
  write_text(dir.path("a.txt"), "caf\xc3\xa9 <|endoftext|>");
  run({"--input", dir.path("a.txt"), "--output-prefix", dir.path("s"), "--tokenizer",
       "sentencepiece", "--tokenizer-file", fixture("spm_tiny.model"), "--append-eod"});
  const auto metadata = nlohmann::json::parse(read_text(dir.path("s.json")));
  EXPECT_EQ(metadata["tokenizer"]["kind"], "sentencepiece");
  EXPECT_EQ(metadata["tokenizer"]["files"][0]["path"], fixture("spm_tiny.model"));
  EXPECT_EQ(metadata["tokenizer"]["files"][0]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(metadata["tokenizer"]["vocab_size"], 700);
  EXPECT_EQ(metadata["tokenizer"]["eod_id"], 2);
  EXPECT_EQ(metadata["documents"], 1);
  EXPECT_EQ(metadata["bytes"], 19);
  EXPECT_EQ(metadata["tokens"], static_cast<int64_t>(documents_of(dir.path("s"))[0].size()));
  EXPECT_EQ(documents_of(dir.path("s"))[0].back(), 2);
  SyntheticEntropy entropy;
  EXPECT_FALSE(read_synthetic_metadata(dir.path("s"), &entropy));  // a corpus with no known floor

  run({"--input", dir.path("a.txt"), "--output-prefix", dir.path("b")});  // byte: today's ids
  const auto byte_metadata = nlohmann::json::parse(read_text(dir.path("b.json")));
  EXPECT_EQ(byte_metadata["tokenizer"]["kind"], "byte");
  EXPECT_EQ(byte_metadata["tokenizer"]["eod_id"], 256);
  EXPECT_EQ(byte_metadata["dtype"], "uint16");
}

TEST(PrepareDataInputs, InvalidUtf8NeedsTheByteTokenizer) {
  ScratchDir dir;
  write_text(dir.path("bad.txt"), "ok\nbad \xff byte\n");
  const auto args = with(gpt2_flags(), {"--input", dir.path("bad.txt"), "--output-prefix",
                                        dir.path("o"), "--split-lines"});
  const std::string message = input_error_of([&] { run(args); });
  EXPECT_NE(message.find(dir.path("bad.txt") + " line 2: invalid UTF-8 at byte 4"),
            std::string::npos)
      << message;
  run({"--input", dir.path("bad.txt"), "--output-prefix", dir.path("o")});
  EXPECT_EQ(documents_of(dir.path("o"))[0].size(), 14u);  // the byte tokenizer takes any bytes
}

TEST(PrepareDataInputs, TokenizerFlagErrors) {
  ScratchDir dir;
  write_text(dir.path("a.txt"), "abc");
  const std::vector<std::string> base = {"--input", dir.path("a.txt"), "--output-prefix",
                                         dir.path("p")};
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--tokenizer", "gpt2", "--vocab-file", "v.json"}, "needs --merge-file"},
      {{"--tokenizer", "hf", "--vocab-file", "v.json"}, "--vocab-file applies to --tokenizer gpt2"},
      {{"--tokenizer", "hf"}, "--tokenizer hf needs --tokenizer-file"},
      {{"--tokenizer", "tiktoken", "--tokenizer-file", "x"}, "needs --split-pattern"},
      {{"--tokenizer", "tiktoken", "--tokenizer-file", "x", "--split-pattern", "p50k"}, "\"p50k\""},
      {{"--tokenizer", "bpe"}, "--tokenizer \"bpe\""},
      {{"--workers", "0"}, "--workers \"0\""},
      {{"--tokenizer", "hf", "--tokenizer-file", "/no/tokenizer.json"},
       "\"/no/tokenizer.json\": cannot open"},
      {{"--tokenizer", "hf", "--tokenizer-file", fixture("small_llama3_style_tokenizer.json"),
        "--append-eod"},
       "no end-of-document token; give --eod-id"},
  };
  for (const auto& [flags, expected] : cases) {
    const std::string message = input_error_of([&] { run(with(base, flags)); });
    EXPECT_NE(message.find(expected), std::string::npos) << flags[0] << " -> " << message;
  }
  expect_only(dir, {"a.txt"});
  const std::string help = run({"--help"});
  for (const char* flag :
       {"--tokenizer", "--vocab-file", "--merge-file", "--tokenizer-file", "--split-pattern",
        "--eod-id", "--json-key", "--skip-bad-lines", "--workers", "--dtype", "--append-eod",
        "--split-lines", "--input", "--output-prefix"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace trainer
