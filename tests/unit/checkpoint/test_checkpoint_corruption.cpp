// Damaged checkpoints are rejected with an InputError that names the file or tensor: a flipped
// byte (checksum), a truncated or missing rank file (size), a malformed manifest, and reads that
// ask for another global shape or dtype or for a tensor the checkpoint does not hold.
#include <gtest/gtest.h>

#include "checkpoint_test_util.h"
#include "runtime/error.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/format.h"

namespace trainer::checkpoint_test {
namespace {

using runtime::DType;

class CheckpointCorruptionTest : public CheckpointTest {
 protected:
  // Two ranks: rank 0 writes rows [0, 4) of param/w and param/b, rank 1 rows [4, 8).
  void SetUp() override {
    CheckpointTest::SetUp();
    const auto errors = run_ranks(2, [&](int rank, parallel::Communicator& world) {
      const ShardSlice rows{0, 4 * rank, 4};
      const std::vector<float> local = reference_slice(weight_, {8, 6}, rows);
      std::vector<TensorShard> shards = {{"param/w", {8, 6}, rows, DType::f32, local.data()}};
      if (rank == 0) shards.push_back({"param/b", {6}, {}, DType::f32, bias_.data()});
      CheckpointMeta meta;
      meta.step = 4;
      save_checkpoint(root_.string(), meta, shards, true, 0, world);
    });
    for (const std::exception_ptr& error : errors) ASSERT_FALSE(error) << message_of(error);
    step_dir_ = path("step_00000004");
  }

  // Expects `action` to throw runtime::InputError whose message contains every piece of `texts`.
  template <typename Action>
  void expect_input_error(const Action& action, const std::vector<std::string>& texts) {
    try {
      action();
      ADD_FAILURE() << "no error; expected one naming " << texts.front();
    } catch (const runtime::InputError& error) {
      for (const std::string& text : texts)
        EXPECT_NE(std::string(error.what()).find(text), std::string::npos)
            << "missing \"" << text << "\" in: " << error.what();
    }
  }

  void edit_manifest(const std::string& from, const std::string& to) {
    const std::string file = step_dir_ + "/manifest.json";
    std::string text = read_text(file);
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    write_bytes(file, {text.begin(), text.end()});
  }

  const std::vector<float> weight_ = distinct_values(8 * 6, 1.f);
  const std::vector<float> bias_ = distinct_values(6, -50.f);
  std::string step_dir_;
};

TEST_F(CheckpointCorruptionTest, IntactCheckpointReads) {
  const CheckpointReader reader(step_dir_);
  std::vector<float> out(8 * 6);
  reader.read("param/w", {8, 6}, {}, DType::f32, out.data());
  EXPECT_EQ(out, weight_);
}

TEST_F(CheckpointCorruptionTest, FlippedByteFailsTheChecksumNamingTheFile) {
  const std::string file = step_dir_ + "/rank_00001.bin";
  std::vector<char> bytes = read_bytes(file);
  bytes[37] = static_cast<char>(bytes[37] ^ 0x01);
  write_bytes(file, bytes);
  const std::string expected =
      checkpoint::hex64(checkpoint::read_manifest(step_dir_).files[1].xxh64);
  expect_input_error([&] { CheckpointReader reader(step_dir_); },
                     {file, "checksum mismatch", "records xxh64 " + expected});

  // Verified on first read: rank 0's tensors still read, anything touching rank 1 fails.
  const CheckpointReader lazy(step_dir_, ChecksumPolicy::verify_on_first_read);
  std::vector<float> out(8 * 6);
  lazy.read("param/w", {8, 6}, {0, 0, 4}, DType::f32, out.data());
  expect_input_error(
      [&] {
        lazy.read("param/w", {8, 6}, {}, DType::f32, out.data());
      },
      {file, "checksum mismatch"});
}

TEST_F(CheckpointCorruptionTest, TruncatedFileFailsTheSizeCheck) {
  const std::string file = step_dir_ + "/rank_00000.bin";
  const auto size = static_cast<int64_t>(fs::file_size(file));
  fs::resize_file(file, static_cast<uintmax_t>(size - 4));
  expect_input_error(
      [&] { CheckpointReader reader(step_dir_, ChecksumPolicy::verify_on_first_read); },
      {file, "size mismatch", "records " + std::to_string(size) + " bytes",
       "has " + std::to_string(size - 4)});
}

TEST_F(CheckpointCorruptionTest, MissingRankFileIsNamed) {
  const std::string file = step_dir_ + "/rank_00001.bin";
  fs::remove(file);
  expect_input_error([&] { CheckpointReader reader(step_dir_); }, {file, "cannot open"});
}

TEST_F(CheckpointCorruptionTest, MalformedManifestIsRejectedByFindAndReader) {
  const std::string manifest = step_dir_ + "/manifest.json";
  const std::string text = read_text(manifest);
  write_bytes(manifest, {text.begin(), text.begin() + static_cast<int64_t>(text.size() / 2)});
  expect_input_error([&] { find_checkpoint(root_.string(), "auto"); },
                     {manifest, "not valid JSON"});
  expect_input_error([&] { CheckpointReader reader(step_dir_); }, {manifest, "not valid JSON"});
  write_bytes(manifest, {});
  expect_input_error([&] { find_checkpoint(root_.string(), "auto"); },
                     {manifest, "not valid JSON"});
  fs::remove(manifest);
  expect_input_error([&] { find_checkpoint(root_.string(), "auto"); }, {manifest, "cannot open"});
}

TEST_F(CheckpointCorruptionTest, ManifestWithMissingFieldOrUnknownVersion) {
  const std::string manifest = step_dir_ + "/manifest.json";
  edit_manifest("\"consumed_samples\": 0,", "");
  expect_input_error([&] { find_checkpoint(root_.string(), "auto"); },
                     {manifest, "missing \"consumed_samples\""});
  edit_manifest("\"version\": 1", "\"version\": 7");
  expect_input_error([&] { CheckpointReader reader(step_dir_); },
                     {manifest, "unknown manifest version 7"});
}

TEST_F(CheckpointCorruptionTest, WrongShapeDtypeOrNameOnReadNamesTheTensor) {
  const CheckpointReader reader(step_dir_);
  std::vector<float> out(8 * 7);
  expect_input_error(
      [&] {
        reader.read("param/w", {8, 7}, {}, DType::f32, out.data());
      },
      {"tensor 'param/w'", "global shape [8, 6]", "expects [8, 7]"});
  expect_input_error([&] { reader.read("param/w", {48}, {}, DType::f32, out.data()); },
                     {"tensor 'param/w'", "global shape [8, 6]", "expects [48]"});
  expect_input_error([&] { reader.read("param/b", {6}, {}, DType::bf16, out.data()); },
                     {"tensor 'param/b'", "dtype f32", "expects bf16"});
  expect_input_error([&] { reader.read("param/nope", {6}, {}, DType::f32, out.data()); },
                     {"tensor 'param/nope' is not in the checkpoint"});
  expect_input_error([&] { reader.global_shape("param/nope"); }, {"tensor 'param/nope'"});
}

}  // namespace
}  // namespace trainer::checkpoint_test
