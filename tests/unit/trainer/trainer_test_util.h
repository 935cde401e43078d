// A temporary run folder with a small synthetic dataset, and a Trainer built on
// it in-process (one rank, host allocator, log captured).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "trainer/data/indexed_dataset.h"
#include "trainer/data/synthetic.h"
#include "trainer/train.h"

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

// A small model config over `data_path`, writing into `out_dir`; more --set overrides follow.
inline Config small_config(const std::string& data_path, const std::string& out_dir,
                           std::vector<std::string> overrides = {}) {
  std::vector<std::string> all = {
      "data.path=" + data_path,       "output.dir=" + out_dir,
      "model.num_layers=2",           "model.hidden_size=32",
      "model.num_attention_heads=2",  "model.seq_length=16",
      "model.vocab_size=256",         "train.micro_batch_size=4",
      "train.global_batch_size=8",    "train.steps=3",
      "train.log_interval=1",         "optimizer.lr_warmup_steps=0"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return parse_config("", "test", all);
}

// A Trainer on an allocator of type AllocatorType (one rank, log captured).
template <class AllocatorType>
struct InProcessRunOn {
  parallel::ProcessGroups groups = parallel::ProcessGroups::single();
  AllocatorType allocator;
  std::ostringstream log;
  std::unique_ptr<Trainer> trainer;

  explicit InProcessRunOn(const Config& config)
      : trainer(std::make_unique<Trainer>(config, groups, allocator, log)) {}
};
using InProcessRun = InProcessRunOn<runtime::CpuAllocator>;

}  // namespace trainer::testing_support
