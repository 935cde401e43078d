// Round trips and resharding: one process saves and reads back bit-identical tensors and meta;
// four thread "ranks" save a tp2 x pp2 layout that is read back whole (tp1) and in every other
// split; data-parallel replicas write nothing; shards that leave a gap are rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "checkpoint_test_util.h"
#include "runtime/error.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/format.h"

namespace trainer::checkpoint_test {
namespace {

using runtime::DType;

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (const int64_t extent : shape) count *= extent;
  return count;
}

template <typename T>
std::vector<T> read_all(const CheckpointReader& reader, const std::string& name,
                        const std::vector<int64_t>& shape, DType dtype) {
  std::vector<T> out(static_cast<size_t>(numel(shape)));
  reader.read(name, shape, {}, dtype, out.data());
  return out;
}

template <typename T>
void expect_bit_identical(const std::vector<T>& actual, const std::vector<T>& expected,
                          const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  if (!actual.empty()) {  // memcmp must not see the null data() of an empty vector
    EXPECT_EQ(std::memcmp(actual.data(), expected.data(), sizeof(T) * actual.size()), 0) << what;
  }
}

TEST_F(CheckpointTest, SingleProcessRoundTripIsBitIdentical) {
  std::vector<float> weight = distinct_values(8 * 6, -3.f);
  weight[5] = -0.f;
  const uint32_t nan_bits = 0x7FC01234u;  // a NaN with a payload: only a byte copy keeps it
  std::memcpy(&weight[7], &nan_bits, sizeof nan_bits);
  weight[9] = std::numeric_limits<float>::denorm_min();
  const std::vector<uint16_t> bf16_values = {0x3F80, 0xBF80, 0x7F80, 0x0001, 0x1234, 0xFFFF};
  const std::vector<int32_t> counters = {-7, 0, 2147483647, 42};
  const std::vector<uint8_t> mask = {0, 1, 255, 7, 9};
  const float scalar = 0.125f;

  CheckpointMeta meta;
  meta.step = 7;
  meta.consumed_samples = 56;
  meta.seed = 0xFFFFFFFFFFFFFFF1ULL;
  meta.config_yaml = "model:\n  hidden_size: 6\n  name: \"tiny\\gpt\"\t# tab\n";
  meta.extra = {{"rng.offset", "9007199254740993"}, {"data.epoch", "3"}, {"empty", ""}};
  const std::vector<TensorShard> shards = {
      {"param/weight", {8, 6}, {}, DType::f32, weight.data()},
      {"param/bf16", {2, 3}, {}, DType::bf16, bf16_values.data()},
      {"state/counters", {4}, {}, DType::i32, counters.data()},
      {"state/mask", {5}, {}, DType::u8, mask.data()},
      {"state/scalar", {}, {}, DType::f32, &scalar},
      {"state/empty", {0, 4}, {}, DType::f32, nullptr},
  };
  parallel::SelfCommunicator self;
  save_checkpoint(root_.string(), meta, shards, true, 3, self);

  EXPECT_EQ(read_text(path("latest")), "step_00000007\n");
  const std::optional<std::string> found = find_checkpoint(root_.string(), "auto");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, path("step_00000007"));
  EXPECT_FALSE(fs::exists(path("step_00000007.tmp")));
  EXPECT_EQ(fs::file_size(path("step_00000007/rank_00000.bin")),
            48 * 4 + 6 * 2 + 4 * 4 + 5 + 4 + 0u);

  const CheckpointReader reader(*found);
  EXPECT_EQ(reader.meta().step, 7);
  EXPECT_EQ(reader.meta().consumed_samples, 56);
  EXPECT_EQ(reader.meta().seed, 0xFFFFFFFFFFFFFFF1ULL);
  EXPECT_EQ(reader.meta().config_yaml, meta.config_yaml);
  EXPECT_EQ(reader.meta().extra, meta.extra);
  EXPECT_EQ(reader.meta().tensor * reader.meta().pipeline * reader.meta().data, 1);
  EXPECT_EQ(reader.names(),
            (std::vector<std::string>{"param/bf16", "param/weight", "state/counters", "state/empty",
                                      "state/mask", "state/scalar"}));
  EXPECT_TRUE(reader.has("param/weight"));
  EXPECT_FALSE(reader.has("param/missing"));
  EXPECT_EQ(reader.global_shape("param/bf16"), (std::vector<int64_t>{2, 3}));

  expect_bit_identical(read_all<float>(reader, "param/weight", {8, 6}, DType::f32), weight,
                       "weight");
  expect_bit_identical(read_all<uint16_t>(reader, "param/bf16", {2, 3}, DType::bf16), bf16_values,
                       "bf16");
  expect_bit_identical(read_all<int32_t>(reader, "state/counters", {4}, DType::i32), counters,
                       "i32");
  expect_bit_identical(read_all<uint8_t>(reader, "state/mask", {5}, DType::u8), mask, "u8");
  EXPECT_EQ(read_all<float>(reader, "state/scalar", {}, DType::f32), std::vector<float>{0.125f});
  EXPECT_TRUE(read_all<float>(reader, "state/empty", {0, 4}, DType::f32).empty());
  std::vector<float> rows(2 * 6);  // a slice of a tensor that was written whole
  reader.read("param/weight", {8, 6}, {0, 3, 2}, DType::f32, rows.data());
  expect_bit_identical(rows, reference_slice(weight, {8, 6}, {0, 3, 2}), "rows 3..5");
}

// A named global tensor and how the tp2 x pp2 layout shards it.
struct LayoutTensor {
  std::string name;
  std::vector<int64_t> shape;
  int stage;      // the pipeline stage that holds it
  int split_dim;  // tensor-parallel split dimension; -1: every tp rank writes it whole;
                  // -2: only tp rank 0 writes it
  std::vector<float> values;
};

std::vector<LayoutTensor> tp2_pp2_model() {
  std::vector<LayoutTensor> tensors = {
      {"param/embedding.word", {16, 4}, 0, 0, {}},
      {"param/layers.0.fc1.weight", {8, 6}, 0, 0, {}},
      {"param/layers.0.fc2.weight", {6, 8}, 0, 1, {}},
      {"param/layers.0.fc1.bias", {8}, 0, 0, {}},
      {"param/layers.0.ln.weight", {6}, 0, -1, {}},
      {"exp_avg/layers.0.fc1.weight", {8, 6}, 0, 0, {}},
      {"param/layers.1.fc1.weight", {8, 6}, 1, 0, {}},
      {"param/layers.1.qkv.weight", {2, 4, 3}, 1, 1, {}},
      {"param/final_norm.weight", {6}, 1, -2, {}},
      {"param/step_scale", {}, 1, -2, {}},
  };
  float base = 1.f;
  for (LayoutTensor& tensor : tensors) {
    tensor.values = distinct_values(numel(tensor.shape), base);
    base += 1000.f;
  }
  return tensors;
}

// The shards that world rank `rank` = tp + 2 * pp holds, with their local data in `storage`.
std::vector<TensorShard> tp2_pp2_shards(const std::vector<LayoutTensor>& tensors, int rank,
                                        std::vector<std::vector<float>>& storage) {
  const int tp = rank % 2, pp = rank / 2;
  std::vector<TensorShard> shards;
  storage.reserve(tensors.size());
  for (const LayoutTensor& tensor : tensors) {
    if (tensor.stage != pp || (tensor.split_dim == -2 && tp != 0)) continue;
    ShardSlice slice;
    if (tensor.split_dim >= 0) {
      const int64_t part = tensor.shape[static_cast<size_t>(tensor.split_dim)] / 2;
      slice = {tensor.split_dim, tp * part, part};
    }
    storage.push_back(reference_slice(tensor.values, tensor.shape, slice));
    shards.push_back({tensor.name, tensor.shape, slice, DType::f32, storage.back().data()});
  }
  return shards;
}

CheckpointMeta layout_meta(int64_t step, int64_t tensor, int64_t pipeline, int64_t data) {
  CheckpointMeta meta;
  meta.step = step;
  meta.consumed_samples = step * 8;
  meta.seed = 1234;
  meta.tensor = tensor;
  meta.pipeline = pipeline;
  meta.data = data;
  return meta;
}

void save_tp2_pp2(const std::string& dir, const std::vector<LayoutTensor>& tensors, int64_t step) {
  const auto errors = run_ranks(4, [&](int rank, parallel::Communicator& world) {
    std::vector<std::vector<float>> storage;
    const std::vector<TensorShard> shards = tp2_pp2_shards(tensors, rank, storage);
    save_checkpoint(dir, layout_meta(step, 2, 2, 1), shards, true, 0, world);
  });
  for (int rank = 0; rank < 4; ++rank)
    ASSERT_FALSE(errors[static_cast<size_t>(rank)])
        << "rank " << rank << ": " << message_of(errors[static_cast<size_t>(rank)]);
}

TEST_F(CheckpointTest, Tp2Pp2CheckpointLoadsIntoTp1) {
  const std::vector<LayoutTensor> tensors = tp2_pp2_model();
  save_tp2_pp2(root_.string(), tensors, 5);
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(fs::exists(path("step_00000005/" + checkpoint::rank_file_name(rank))));

  const CheckpointReader reader(*find_checkpoint(root_.string(), "auto"));
  EXPECT_EQ(reader.meta().tensor, 2);
  EXPECT_EQ(reader.meta().pipeline, 2);
  std::set<std::string> expected_names;
  for (const LayoutTensor& tensor : tensors) expected_names.insert(tensor.name);
  const std::vector<std::string> names = reader.names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected_names);
  for (const LayoutTensor& tensor : tensors) {
    EXPECT_EQ(reader.global_shape(tensor.name), tensor.shape) << tensor.name;
    expect_bit_identical(read_all<float>(reader, tensor.name, tensor.shape, DType::f32),
                         tensor.values, tensor.name);
  }
}

TEST_F(CheckpointTest, Tp2Pp2CheckpointLoadsIntoEveryOtherSplit) {
  const std::vector<LayoutTensor> tensors = tp2_pp2_model();
  save_tp2_pp2(root_.string(), tensors, 5);
  const CheckpointReader reader(path("step_00000005"));
  int reads = 0;
  for (const LayoutTensor& tensor : tensors) {
    for (int dim = 0; dim < static_cast<int>(tensor.shape.size()); ++dim) {
      const int64_t extent = tensor.shape[static_cast<size_t>(dim)];
      for (int64_t parts = 1; parts <= 4; ++parts) {  // 3 parts straddle the written halves
        for (int64_t part = 0; part < parts; ++part) {
          const int64_t begin = part * extent / parts, end = (part + 1) * extent / parts;
          const ShardSlice slice{dim, begin, end - begin};
          const std::vector<float> expected = reference_slice(tensor.values, tensor.shape, slice);
          std::vector<float> actual(expected.size(), -1.f);
          reader.read(tensor.name, tensor.shape, slice, DType::f32, actual.data());
          expect_bit_identical(
              actual, expected,
              tensor.name + " " + checkpoint::slice_text(slice) + " of " + std::to_string(parts));
          ++reads;
        }
      }
    }
  }
  EXPECT_EQ(reads, 160);  // 16 dimensions x (1 + 2 + 3 + 4) parts
}

TEST_F(CheckpointTest, DataParallelReplicasWriteNoFiles) {
  const std::vector<float> weight = distinct_values(8 * 6, 5.f), bias = distinct_values(6, -9.f);
  const auto errors = run_ranks(4, [&](int rank, parallel::Communicator& world) {
    const int tp = rank % 2, dp = rank / 2;  // tp2 x dp2: dp rank 1 holds replicas
    const std::vector<float> local = reference_slice(weight, {8, 6}, {1, tp * 3, 3});
    std::vector<TensorShard> shards = {
        {"param/w", {8, 6}, {1, tp * 3, 3}, DType::f32, local.data()}};
    if (tp == 0) shards.push_back({"param/b", {6}, {}, DType::f32, bias.data()});
    if (dp != 0) shards.clear();
    save_checkpoint(root_.string(), layout_meta(3, 2, 1, 2), shards, dp == 0, 0, world);
  });
  for (const std::exception_ptr& error : errors) ASSERT_FALSE(error) << message_of(error);
  EXPECT_TRUE(fs::exists(path("step_00000003/rank_00000.bin")));
  EXPECT_TRUE(fs::exists(path("step_00000003/rank_00001.bin")));
  EXPECT_FALSE(fs::exists(path("step_00000003/rank_00002.bin")));
  EXPECT_FALSE(fs::exists(path("step_00000003/rank_00003.bin")));
  EXPECT_EQ(checkpoint::read_manifest(path("step_00000003")).files.size(), 2u);
  const CheckpointReader reader(path("step_00000003"));
  EXPECT_EQ(reader.meta().data, 2);
  expect_bit_identical(read_all<float>(reader, "param/w", {8, 6}, DType::f32), weight, "w");
  expect_bit_identical(read_all<float>(reader, "param/b", {6}, DType::f32), bias, "b");
}

TEST_F(CheckpointTest, ReplicatedShardsAreReadOnceAndFilesVerifiedWhenTouched) {
  // Both tp ranks of stage 0 write the layernorm weight whole: two copies, one per file.
  const std::vector<LayoutTensor> tensors = tp2_pp2_model();
  save_tp2_pp2(root_.string(), tensors, 1);
  const checkpoint::Manifest manifest = checkpoint::read_manifest(path("step_00000001"));
  std::vector<const checkpoint::ManifestShard*> copies;
  for (const checkpoint::ManifestShard& shard : manifest.shards)
    if (shard.name == "param/layers.0.ln.weight") copies.push_back(&shard);
  ASSERT_EQ(copies.size(), 2u);
  ASSERT_EQ(copies[1]->file, "rank_00001.bin");
  // Damage the second copy. A reader that took data from it would fail its checksum.
  const std::string damaged = path("step_00000001/rank_00001.bin");
  std::vector<char> bytes = read_bytes(damaged);
  bytes[static_cast<size_t>(copies[1]->offset)] ^= 0x40;
  write_bytes(damaged, bytes);

  const CheckpointReader reader(path("step_00000001"), ChecksumPolicy::verify_on_first_read);
  expect_bit_identical(read_all<float>(reader, "param/layers.0.ln.weight", {6}, DType::f32),
                       tensors[4].values, "ln");
  std::vector<float> out(8 * 6);  // rows [4, 8) live in the damaged file only
  EXPECT_THROW(reader.read("param/layers.0.fc1.weight", {8, 6}, {}, DType::f32, out.data()),
               runtime::InputError);
  EXPECT_THROW(CheckpointReader(path("step_00000001")), runtime::InputError);  // verify_all
}

TEST_F(CheckpointTest, GapsInTheWrittenShardsAreRejected) {
  const std::vector<float> weight = distinct_values(8 * 6, 2.f), other = distinct_values(3, 0.f);
  const auto errors = run_ranks(2, [&](int rank, parallel::Communicator& world) {
    // Rank 0 writes rows [0, 4) of param/w; rank 1 holds another tensor and not rows [4, 8).
    const std::vector<float> rows = reference_slice(weight, {8, 6}, {0, 0, 4});
    std::vector<TensorShard> shards;
    if (rank == 0) shards.push_back({"param/w", {8, 6}, {0, 0, 4}, DType::f32, rows.data()});
    if (rank == 1) shards.push_back({"param/other", {3}, {}, DType::f32, other.data()});
    save_checkpoint(root_.string(), layout_meta(2, 1, 2, 1), shards, true, 0, world);
  });
  for (const std::exception_ptr& error : errors) ASSERT_FALSE(error) << message_of(error);
  const CheckpointReader reader(path("step_00000002"));
  std::vector<float> out(8 * 6);
  try {
    reader.read("param/w", {8, 6}, {}, DType::f32, out.data());
    ADD_FAILURE() << "a read with uncovered rows succeeded";
  } catch (const runtime::InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("tensor 'param/w'"), std::string::npos) << message;
    EXPECT_NE(message.find("do not cover [4:8, 0:6]"), std::string::npos) << message;
  }
  try {
    reader.read("param/w", {8, 6}, {1, 0, 3}, DType::f32, out.data());
    ADD_FAILURE() << "a read with uncovered rows succeeded";
  } catch (const runtime::InputError& error) {
    EXPECT_NE(std::string(error.what()).find("do not cover [4:8, 0:3]"), std::string::npos)
        << error.what();
  }
  std::vector<float> covered(4 * 6);
  reader.read("param/w", {8, 6}, {0, 0, 4}, DType::f32, covered.data());
  expect_bit_identical(covered, reference_slice(weight, {8, 6}, {0, 0, 4}), "rows 0..3");
}

}  // namespace
}  // namespace trainer::checkpoint_test
