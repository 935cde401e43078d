// The trainer's device path on an emulated device (host memory behind a device allocator,
// tests/support/emulated_device.h): with the same kernels, a run whose weights, batches,
// optimizer state and checkpoints go through uploads and downloads must equal the host run
// bit for bit — losses, validation, checkpoints, resume, export and the non-finite check.
#include <cstring>
#include <fstream>
#include <iterator>

#include "runtime/ops.h"
#include "tests/support/emulated_device.h"
#include "trainer_fixture.h"

namespace trainer {
namespace {

using testing_support::TempDir;

// A Trainer whose allocator is the emulated device's.
struct DeviceRun {
  emulated::Device device;
  parallel::ProcessGroups groups = parallel::ProcessGroups::single();
  emulated::DeviceAllocator allocator;
  std::ostringstream log;
  std::unique_ptr<Trainer> trainer;
  explicit DeviceRun(const Config& config)
      : trainer(std::make_unique<Trainer>(config, groups, allocator, log)) {}
};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The metrics lines without the timing fields (ms, tokens/s, TFLOP/s), which differ.
std::vector<std::string> losses(const std::string& metrics_path) {
  std::vector<std::string> out;
  for (const std::string& line : testing_support::read_lines(metrics_path)) {
    const size_t end = line.find(", \"lr\"");
    out.push_back(line.substr(0, end));
    const size_t val = line.find("\"val_loss\"");
    if (val != std::string::npos) out.back() += line.substr(val, line.find_first_of(",}", val) - val);
  }
  return out;
}

std::vector<std::string> common_overrides(const TempDir& dir, const std::string& name) {
  return {"train.steps=4",
          "model.hidden_dropout=0.1",
          "model.attention_dropout=0.1",
          "data.shuffle=true",
          "data.split=[90, 10]",
          "train.eval_interval=2",
          "train.eval_iters=2",
          "optimizer.lr_warmup_steps=1",
          "output.export=true",
          "checkpoint.dir=" + dir / (name + "-ckpt"),
          "checkpoint.interval=2"};
}

// The guard itself: device memory is open to the device ops only (Note [Emulated device
// memory]), so a host read of a device tensor dies as it would be wrong on a GPU.
TEST(EmulatedDeviceDeathTest, HostReadOfDeviceMemoryFaultsOutsideDeviceOps) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const emulated::Device device;
  emulated::DeviceAllocator allocator;
  const runtime::Tensor t = runtime::Tensor::empty(allocator, {16}, runtime::DType::f32,
                                                   runtime::MemoryCategory::workspace);
  runtime::ops::zero(t);  // a device op: allowed
  EXPECT_EQ(runtime::ops::sum(t), 0.0);
  EXPECT_DEATH({ t.f32()[3] = 1.0f; }, "");
  {
    const emulated::Access open;  // as a library reading device buffers would
    EXPECT_EQ(t.f32()[3], 0.0f);
  }
}

TEST(EmulatedDevice, RunEqualsTheHostRunBitForBit) {
  TempDir dir;
  testing_support::write_corpus(dir / "data", {.num_tokens = 20'000});
  testing_support::InProcessRun host(
      testing_support::small_config(dir / "data", dir / "host", common_overrides(dir, "host")));
  host.trainer->run();
  DeviceRun device(
      testing_support::small_config(dir / "data", dir / "device", common_overrides(dir, "device")));
  EXPECT_EQ(device.trainer->params().flat.device(), runtime::DeviceKind::cuda);
  device.trainer->run();

  const auto host_losses = losses(dir / "host/metrics.jsonl");
  ASSERT_EQ(host_losses.size(), 4u);
  EXPECT_NE(host_losses[1].find("val_loss"), std::string::npos) << host_losses[1];
  EXPECT_EQ(losses(dir / "device/metrics.jsonl"), host_losses);
  const auto& a = host.trainer->host_params().flat;
  const auto& b = device.trainer->host_params().flat;
  EXPECT_EQ(b.device(), runtime::DeviceKind::cpu);
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())), 0);
  const std::string exported = file_bytes(dir / "host/model.safetensors");
  EXPECT_FALSE(exported.empty());
  EXPECT_EQ(file_bytes(dir / "device/model.safetensors"), exported);
  // Checkpoints written from device state hold the host run's bytes (shard files compared).
  for (const char* step : {"step_00000002", "step_00000004"}) {
    for (const auto& entry : std::filesystem::directory_iterator(dir / (std::string("host-ckpt/") + step))) {
      const std::string name = entry.path().filename().string();
      if (name.find("manifest") != std::string::npos) continue;  // holds the config (paths)
      EXPECT_EQ(file_bytes(dir / (std::string("device-ckpt/") + step + "/" + name)),
                file_bytes(entry.path().string()))
          << step << "/" << name;
    }
  }
}

TEST(EmulatedDevice, ResumesFromAHostCheckpointAndAHostRunFromItsCheckpoint) {
  TempDir dir;
  testing_support::write_corpus(dir / "data", {.num_tokens = 20'000});
  testing_support::InProcessRun whole(
      testing_support::small_config(dir / "data", dir / "whole", common_overrides(dir, "whole")));
  whole.trainer->run();
  // A device run resumes the host run's step-2 checkpoint; a host run the device's.
  {
    DeviceRun first(
        testing_support::small_config(dir / "data", dir / "first", common_overrides(dir, "first")));
    first.trainer->train_step();
    first.trainer->train_step();
    first.trainer->save_checkpoint();
  }
  testing_support::InProcessRun host_resumed(
      testing_support::small_config(dir / "data", dir / "host-resumed", common_overrides(dir, "first")));
  ASSERT_TRUE(host_resumed.trainer->resume("auto"));
  DeviceRun device_resumed(
      testing_support::small_config(dir / "data", dir / "device-resumed", common_overrides(dir, "whole")));
  ASSERT_TRUE(device_resumed.trainer->resume(dir / "whole-ckpt/step_00000002"));
  const auto whole_losses = losses(dir / "whole/metrics.jsonl");
  for (int64_t step = 3; step <= 4; ++step) {
    const double host_loss = host_resumed.trainer->train_step().loss;
    const double device_loss = device_resumed.trainer->train_step().loss;
    EXPECT_EQ(host_loss, device_loss) << "step " << step;
    EXPECT_NE(whole_losses[static_cast<size_t>(step - 1)].find(std::to_string(step)),
              std::string::npos);
  }
  const auto& a = whole.trainer->host_params().flat;
  const auto& b = device_resumed.trainer->host_params().flat;
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())), 0);
}

TEST(EmulatedDevice, NonFiniteGradientIsNamedFromDeviceTensors) {
  TempDir dir;
  testing_support::write_corpus(dir / "data", {.num_tokens = 20'000});
  DeviceRun run(testing_support::small_config(
      dir / "data", dir / "run",
      {"optimizer.lr=1e30", "optimizer.clip_grad=0", "train.steps=10",
       "train.on_nonfinite=skip_step", "train.max_skipped_steps=1"}));
  run.trainer->train_step();  // finite; blows the weights up
  run.trainer->train_step();  // skipped
  EXPECT_NE(run.log.str().find("(first: gradient of "), std::string::npos) << run.log.str();
  EXPECT_NE(run.log.str().find("update skipped"), std::string::npos);
  EXPECT_THROW(run.trainer->train_step(), runtime::Error);
}

}  // namespace
}  // namespace trainer
