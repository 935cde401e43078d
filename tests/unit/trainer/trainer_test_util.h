// A temporary run folder with a small synthetic dataset, and a Trainer built on
// it in-process (one rank, host allocator, log captured); checks of what runs leave.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/expect_error.h"
#include "trainer/data/dataset_metadata.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/synthetic.h"
#include "trainer/run/train.h"

namespace trainer::testing_support {

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("trainer-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
  static inline int counter_ = 0;
};

// What a shell command printed (stdout and stderr) and its exit code (-1: it did not exit).
struct CommandResult {
  int exit_code;
  std::string output;
};
inline CommandResult run_command(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  CommandResult result{-1, ""};
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The lines of a text file (metrics.jsonl, latest).
inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Writes a synthetic corpus at `prefix` (with its entropy sidecar).
inline SyntheticEntropy write_corpus(const std::string& prefix, const SyntheticCorpusSpec& spec) {
  const SyntheticCorpus corpus = make_synthetic_corpus(spec);
  IndexedDatasetWriter writer(prefix, TokenDType::uint16);
  writer.add_document(corpus.tokens);
  writer.finish();
  write_synthetic_metadata(prefix, spec, corpus.entropy);
  return corpus.entropy;
}

// <prefix>.json naming a tokenizer of this identity, its eod id vocab_size - 1 (the tokens stay
// the synthetic corpus's).
inline void name_tokenizer(const std::string& prefix, const std::string& kind, int64_t vocab_size) {
  DatasetMetadata metadata;
  metadata.tokenizer.kind = kind;
  metadata.tokenizer.files = {{"/t/" + kind + ".json", "5eed" + kind}};
  metadata.tokenizer.vocab_size = vocab_size;
  metadata.tokenizer.eod_id = static_cast<int32_t>(vocab_size - 1);
  metadata.dtype = "uint16";
  DatasetMetadataFile file(prefix, metadata);
  file.commit();
}

// A small model config over `data_path` (none when empty: the overrides give data.blend),
// writing into `out_dir`; more --set overrides follow.
inline Config small_config(const std::string& data_path, const std::string& out_dir,
                           std::vector<std::string> overrides = {}) {
  std::vector<std::string> all = {
      "output.dir=" + out_dir,       "model.num_layers=2",         "model.hidden_size=32",
      "model.num_attention_heads=2", "model.seq_length=16",        "model.vocab_size=256",
      "train.micro_batch_size=4",    "train.global_batch_size=8",  "train.steps=3",
      "train.log_interval=1",        "optimizer.lr_warmup_steps=0"};
  if (!data_path.empty()) all.insert(all.begin(), "data.path=" + data_path);
  all.insert(all.end(), overrides.begin(), overrides.end());
  return parse_config("", "test", all);
}

// The small config as a Llama block: RMSNorm, SwiGLU, RoPE, 4 query heads over 2 key/value
// heads.
inline std::vector<std::string> llama_overrides() {
  return {"model.architecture=llama", "model.num_attention_heads=4", "model.num_query_groups=2",
          "model.ffn_hidden_size=48"};
}

// A TempDir with a synthetic corpus at `data`, and the small configs of runs over it.
class CorpusDir : public TempDir {
 public:
  explicit CorpusDir(int64_t num_tokens = 20'000) {
    write_corpus(*this / "data", {.num_tokens = num_tokens});
  }
  // small_config over the corpus, writing into the folder `run`.
  Config config(const std::string& run, std::vector<std::string> overrides = {}) const {
    return small_config(*this / "data", *this / run, std::move(overrides));
  }
};

// Overrides whose first update blows the weights up (lr 1e30, no clipping, 10 steps), so that
// the second step is not finite; then `more`.
inline std::vector<std::string> diverging(std::vector<std::string> more = {}) {
  more.insert(more.begin(), {"optimizer.lr=1e30", "optimizer.clip_grad=0", "train.steps=10"});
  return more;
}

// Whether two tensors hold the same bytes.
inline bool same_bytes(const runtime::Tensor& a, const runtime::Tensor& b) {
  return a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

using test_support::expect_error;

// A Trainer on an allocator of type AllocatorType (one rank, log captured).
template <class AllocatorType>
struct InProcessRunOn {
  parallel::ProcessGroups groups = parallel::ProcessGroups::single();
  AllocatorType allocator;
  std::ostringstream log;
  std::unique_ptr<Trainer> trainer;

  explicit InProcessRunOn(const Config& config)
      : trainer(std::make_unique<Trainer>(plan_run(config, groups, allocator), groups, allocator,
                                          log)) {}
};
using InProcessRun = InProcessRunOn<runtime::CpuAllocator>;

}  // namespace trainer::testing_support
