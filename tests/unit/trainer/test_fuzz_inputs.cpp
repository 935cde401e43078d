// Mutated inputs end in a clear error, never a crash: YAML configs, dataset
// indexes and checkpoint manifests with random byte flips, insertions and
// truncations (deterministic). Build with -DTRAINER_SANITIZE=address to run
// these under AddressSanitizer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer_test_util.h"

namespace trainer {
namespace {

std::string mutate(std::string text, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const size_t at = rng() % text.size();
    switch (rng() % 4) {
      case 0:
        text[at] = static_cast<char>(rng() % 256);
        break;
      case 1:
        text.insert(at, 1, "{}[]:,-\n \"'0x9"[rng() % 14]);
        break;
      case 2:
        text.erase(at, 1 + rng() % 8);
        break;
      case 3:
        text.resize(at);
        break;
    }
  }
  return text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Runs `attempt` on many mutations; each must succeed or throw runtime::Error.
template <typename Attempt>
void expect_clear_errors(const std::string& original, int cases, Attempt attempt) {
  std::mt19937 rng(12345);
  int rejected = 0;
  for (int i = 0; i < cases; ++i) {
    const std::string mutated = mutate(original, rng);
    try {
      attempt(mutated);
    } catch (const runtime::Error& e) {
      ++rejected;
      EXPECT_GT(std::string(e.what()).size(), 10u);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "case " << i << ": not a clear error: " << e.what();
    }
  }
  EXPECT_GT(rejected, cases / 4);  // the mutations do reach the checks
}

TEST(Fuzz, MutatedConfigs) {
  const std::string yaml = read_file(std::string(TRAINER_SOURCE_DIR) + "/configs/tiny.yaml") +
                           "recompute: {granularity: selective, modules: [core_attn, mlp],"
                           " layers: [{range: [0, 1], granularity: full}]}\n";
  expect_clear_errors(yaml, 2000, [](const std::string& text) { parse_config(text, "fuzz.yaml"); });
}

TEST(Fuzz, MutatedDatasetIndexes) {
  testing_support::TempDir dir;
  testing_support::write_corpus(dir / "data", {.num_tokens = 5'000});
  const std::string idx = read_file(dir / "data.idx");
  std::filesystem::copy_file(dir / "data.bin", dir / "m.bin");
  expect_clear_errors(idx, 1000, [&](const std::string& bytes) {
    write_file(dir / "m.idx", bytes);
    IndexedDataset dataset(dir / "m");
  });
}

TEST(Fuzz, MutatedCheckpointManifests) {
  testing_support::TempDir dir;
  testing_support::write_corpus(dir / "data", {.num_tokens = 20'000});
  testing_support::InProcessRun run(
      testing_support::small_config(dir / "data", dir / "run", {"checkpoint.dir=" + dir / "ckpt"}));
  run.trainer->train_step();
  run.trainer->save_checkpoint();
  const std::string step_dir = dir / "ckpt/step_00000001";
  const std::string manifest = read_file(step_dir + "/manifest.json");
  expect_clear_errors(manifest, 500, [&](const std::string& text) {
    write_file(step_dir + "/manifest.json", text);
    CheckpointReader reader(step_dir);
    for (const std::string& name : reader.names()) {
      std::vector<float> out(static_cast<size_t>(runtime::shape_numel(reader.global_shape(name))));
      reader.read(name, reader.global_shape(name), {}, runtime::DType::f32, out.data());
    }
  });
}

TEST(Fuzz, UnwritableRunFolderIsAClearError) {
  testing_support::TempDir dir;
  testing_support::write_corpus(dir / "data", {.num_tokens = 20'000});
  write_file(dir / "file", "x");  // a file where the run folder's parent should be
  try {
    testing_support::InProcessRun run(
        testing_support::small_config(dir / "data", dir / "file/run", {}));
    FAIL() << "created a run folder under a file";
  } catch (const runtime::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("output.dir: cannot create"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trainer
