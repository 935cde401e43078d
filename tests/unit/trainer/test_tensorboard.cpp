// The TensorBoard event file pieces: CRC32C against its published check value, record framing
// bytes, the Event encoding byte for byte, torn tails, and the rewrite a resume does. (The whole
// file read by an independent decoder: tests/system/tensorboard.sh.)
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/support/temp_dir_test.h"
#include "trainer/observe/tensorboard.h"
#include "trainer/observe/tfrecord.h"

namespace trainer {
namespace {

using tfrecord::ScalarValue;

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out.push_back(static_cast<char>(v));
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(TfRecord, Crc32cMatchesItsCheckValueAndTheMaskedForm) {
  EXPECT_EQ(tfrecord::crc32c("123456789"), 0xe3069283u);  // the CRC-32C catalogue's check
  EXPECT_EQ(tfrecord::crc32c(""), 0u);
  EXPECT_EQ(tfrecord::masked_crc32c("123456789"), 0xc78ab0e5u);
}

TEST(TfRecord, FrameIsLengthCrcDataCrc) {
  const std::string record = tfrecord::frame_record("abc");
  ASSERT_EQ(record.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(record.substr(0, 8), bytes({3, 0, 0, 0, 0, 0, 0, 0}));
  uint32_t length_crc = 0, data_crc = 0;
  std::memcpy(&length_crc, record.data() + 8, 4);
  std::memcpy(&data_crc, record.data() + 15, 4);
  EXPECT_EQ(length_crc, tfrecord::masked_crc32c(record.substr(0, 8)));
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(data_crc, tfrecord::masked_crc32c("abc"));
}

TEST(TfRecord, ScalarEventBytesAreTheProtobufEncoding) {
  // wall_time 1.0 (field 1, fixed64), step 300 (field 2, varint ac 02), summary (field 5) of
  // one value {tag "a" (field 1), simple_value 0.5 (field 2, fixed32)}.
  const std::string event = tfrecord::encode_scalars_event(1.0, 300, {{"a", 0.5f}});
  const std::string expected =
      bytes({0x09, 0,    0,    0,    0,    0,    0,   0xf0, 0x3f, 0x10, 0xac, 0x02,
             0x2a, 0x0a, 0x0a, 0x08, 0x0a, 0x01, 'a', 0x15, 0,    0,    0,    0x3f});
  EXPECT_EQ(event, expected);
  EXPECT_EQ(tfrecord::event_step(event), 300);
  const std::string version = tfrecord::encode_file_version_event(1.0, "brain.Event:2");
  EXPECT_EQ(version.substr(9), bytes({0x1a, 13}) + "brain.Event:2");  // no step field
  EXPECT_EQ(tfrecord::event_step(version), 0);
}

TEST(TfRecord, ReadStopsAtATornTail) {
  const std::string file = tfrecord::frame_record("one") + tfrecord::frame_record("two");
  bool torn = true;
  EXPECT_EQ(tfrecord::read_records(file, &torn), (std::vector<std::string>{"one", "two"}));
  EXPECT_FALSE(torn);
  EXPECT_EQ(tfrecord::read_records(file.substr(0, file.size() - 2), &torn),
            (std::vector<std::string>{"one"}));
  EXPECT_TRUE(torn);
  std::string flipped = file;
  flipped[13] ^= 1;  // the first record's data
  EXPECT_TRUE(tfrecord::read_records(flipped, &torn).empty());
  EXPECT_TRUE(torn);
}

class TensorBoardFiles : public test_support::TempDirTest {
 protected:
  TensorBoardFiles() : TempDirTest("tensorboard_") {}
};

std::vector<int64_t> steps_in(const std::string& path) {
  std::vector<int64_t> steps;
  for (const std::string& event : tfrecord::read_records(read_file(path)))
    steps.push_back(tfrecord::event_step(event));
  return steps;
}

TEST_F(TensorBoardFiles, AResumeDropsLaterEventsAndStartsAFileOfItsOwn) {
  const std::string dir = path("tb");
  auto run = [&](std::optional<int64_t> resumed_from, int64_t first, int64_t last) {
    TensorBoardWriter writer(dir, resumed_from);
    for (int64_t step = first; step <= last; ++step) {
      StepMetrics m;
      m.step = step;
      writer.write(m);
    }
  };
  run(std::nullopt, 1, 6);
  run(4, 5, 8);  // resumed from a checkpoint of step 4
  const std::vector<std::string> files = event_files(dir);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(steps_in(files[0]), (std::vector<int64_t>{0, 1, 2, 3, 4}));  // 0: file_version
  EXPECT_EQ(steps_in(files[1]), (std::vector<int64_t>{0, 5, 6, 7, 8}));
  run(std::nullopt, 1, 2);  // a fresh run removes the old files
  ASSERT_EQ(event_files(dir).size(), 1u);
  EXPECT_EQ(steps_in(event_files(dir)[0]), (std::vector<int64_t>{0, 1, 2}));
}

TEST(TensorBoardScalars, EveryCategoryMeasuredAndPredictedAndValLossOnlyWhenEvaluated) {
  StepMetrics m;
  m.loss = 2.5;
  m.memory.by_category[static_cast<size_t>(runtime::MemoryCategory::activation)].peak = 4096;
  m.predicted_memory[static_cast<size_t>(runtime::MemoryCategory::activation)] = 8192;
  auto find = [](const std::vector<ScalarValue>& values, const std::string& tag) {
    for (const ScalarValue& v : values)
      if (v.tag == tag) return std::optional<float>(v.value);
    return std::optional<float>();
  };
  std::vector<ScalarValue> values = tensorboard_scalars(m);
  EXPECT_EQ(find(values, "train/loss"), 2.5f);
  EXPECT_EQ(find(values, "memory/activation_peak_bytes"), 4096.f);
  EXPECT_EQ(find(values, "memory/predicted_activation_peak_bytes"), 8192.f);
  EXPECT_EQ(find(values, "memory/comm_peak_bytes"), 0.f);
  EXPECT_FALSE(find(values, "val/loss"));
  m.val_loss = 1.75;
  EXPECT_EQ(find(tensorboard_scalars(m), "val/loss"), 1.75f);
  EXPECT_FALSE(find(tensorboard_scalars(m), "val/loss/web"));
  m.dataset_val_losses = {{"web", 1.5}, {"web_2", 2.25}};  // a blend's datasets
  values = tensorboard_scalars(m);
  EXPECT_EQ(find(values, "val/loss/web"), 1.5f);
  EXPECT_EQ(find(values, "val/loss/web_2"), 2.25f);
}

}  // namespace
}  // namespace trainer
