// Helpers of the MPI tests: the world's ProcessGroups for a layout, a shared
// temporary folder with a synthetic corpus, and in-process training runs.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/emulated_device.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/synthetic.h"
#include "trainer/run/train.h"

namespace mpi_test {

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// True on every rank when `ok` holds on every rank.
inline bool all_ranks(bool ok) {
  int value = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return value == 1;
}

// A folder made by rank 0 and known to every rank, holding a small corpus (`data`) and a
// second one of another chain (`code`, for blends).
class SharedData {
 public:
  SharedData() {
    char path[256] = {};
    if (world_rank() == 0) {
      const auto dir =
          std::filesystem::temp_directory_path() / ("trainer-mpi-" + std::to_string(::getpid()));
      std::filesystem::create_directories(dir);
      std::snprintf(path, sizeof path, "%s", dir.c_str());
      write_corpus(std::string(path) + "/data", {.num_tokens = 60'000});
      write_corpus(std::string(path) + "/code",
                   {.seed = 7, .num_tokens = 20'000, .alphabet = 24, .branching = 2});
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    dir_ = path;
  }
  ~SharedData() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) std::filesystem::remove_all(dir_);
  }
  std::string data() const { return dir_ + "/data"; }
  std::string code() const { return dir_ + "/code"; }
  std::string out(const std::string& name) const { return dir_ + "/" + name; }

 private:
  static void write_corpus(const std::string& prefix, const trainer::SyntheticCorpusSpec& spec) {
    const trainer::SyntheticCorpus corpus = trainer::make_synthetic_corpus(spec);
    trainer::IndexedDatasetWriter writer(prefix, trainer::TokenDType::uint16);
    writer.add_document(corpus.tokens);
    writer.finish();
  }

  std::string dir_;
};

// A parallel layout of a test: its world size, a name for messages, and its config overrides.
struct Layout {
  int ranks;
  const char* name;
  std::vector<std::string> overrides;
};

// A small model with dropout on, over the shared corpus unless `layout` gives data.blend;
// `layout` and more are --set overrides.
inline trainer::Config config_for(const SharedData& shared,
                                  const std::vector<std::string>& layout) {
  const bool blend = std::any_of(layout.begin(), layout.end(),
                                 [](const std::string& o) { return o.starts_with("data.blend="); });
  std::vector<std::string> all = {
      "data.path=" + (blend ? std::string("~") : shared.data()), "output.dir=" + shared.out("run"),
      "output.export=false", "model.num_layers=4", "model.hidden_size=32",
      "model.num_attention_heads=4", "model.seq_length=16",
      // 123 tokens pad to 125 on one rank and to 130 with tp 2: padding differs by layout.
      "model.vocab_size=123", "model.make_vocab_size_divisible_by=5", "model.hidden_dropout=0.1",
      "model.attention_dropout=0.1", "train.micro_batch_size=2", "train.global_batch_size=8",
      "train.steps=3", "optimizer.lr_warmup_steps=0", "optimizer.lr=1e-2"};
  all.insert(all.end(), layout.begin(), layout.end());
  return trainer::parse_config("", "mpi-test", all);
}

// Changes the world's groups before the trainer is built (device communicators in tests).
using GroupsSetup = std::function<void(parallel::ProcessGroups&)>;

struct Run {
  parallel::ProcessGroups groups;
  std::unique_ptr<runtime::Allocator> allocator;
  std::ostringstream log;
  std::unique_ptr<trainer::Trainer> trainer;

  // Every rank of the world when `world`, else rank 0 alone (the reference). With
  // `emulated_device` the trainer's tensors live on an emulated device (the caller keeps an
  // emulated::Device registered), so every collective stages them through host memory.
  Run(const trainer::Config& config, bool world, bool emulated_device = false,
      const GroupsSetup& setup = {})
      : groups(world ? parallel::ProcessGroups::from_mpi(config.parallel)
                     : parallel::ProcessGroups::single()),
        allocator(emulated_device
                      ? std::unique_ptr<runtime::Allocator>(new emulated::DeviceAllocator())
                      : std::make_unique<runtime::CpuAllocator>()) {
    if (setup) setup(groups);
    trainer = std::make_unique<trainer::Trainer>(trainer::plan_run(config, groups, *allocator),
                                                 groups, *allocator, log);
  }
};

}  // namespace mpi_test
