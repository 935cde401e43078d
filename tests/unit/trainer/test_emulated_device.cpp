// The trainer's device path on an emulated device (host memory behind a device allocator,
// tests/support/emulated_device.h): with the same kernels, a run whose weights, batches,
// optimizer state and checkpoints go through uploads and downloads must equal the host run
// bit for bit — losses, validation, checkpoints, resume, export and the non-finite check.
#include <cstdio>
#include <fstream>
#include <iterator>

#include "runtime/ops.h"
#include "tests/support/emulated_device.h"
#include "trainer_test_util.h"

namespace trainer {
namespace {

using testing_support::CorpusDir;

// A Trainer whose allocator is the emulated device's (registered first, for its lifetime).
struct DeviceRun : private emulated::Device,
                   testing_support::InProcessRunOn<emulated::DeviceAllocator> {
  using InProcessRunOn::InProcessRunOn;
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
    if (val != std::string::npos)
      out.back() += line.substr(val, line.find_first_of(",}", val) - val);
  }
  return out;
}

std::vector<std::string> common_overrides(const testing_support::TempDir& dir,
                                          const std::string& name) {
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
  CorpusDir dir;
  testing_support::InProcessRun host(dir.config("host", common_overrides(dir, "host")));
  host.trainer->run();
  DeviceRun device(dir.config("device", common_overrides(dir, "device")));
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
  EXPECT_TRUE(testing_support::same_bytes(a, b));
  const std::string exported = file_bytes(dir / "host/model.safetensors");
  EXPECT_FALSE(exported.empty());
  EXPECT_EQ(file_bytes(dir / "device/model.safetensors"), exported);
  // Checkpoints written from device state hold the host run's bytes (shard files compared).
  for (const char* step : {"step_00000002", "step_00000004"}) {
    for (const auto& entry :
         std::filesystem::directory_iterator(dir / (std::string("host-ckpt/") + step))) {
      const std::string name = entry.path().filename().string();
      if (name.find("manifest") != std::string::npos) continue;  // holds the config (paths)
      EXPECT_EQ(file_bytes(dir / (std::string("device-ckpt/") + step + "/" + name)),
                file_bytes(entry.path().string()))
          << step << "/" << name;
    }
  }
}

TEST(EmulatedDevice, ResumesFromAHostCheckpointAndAHostRunFromItsCheckpoint) {
  CorpusDir dir;
  testing_support::InProcessRun whole(dir.config("whole", common_overrides(dir, "whole")));
  whole.trainer->run();
  // A device run resumes the host run's step-2 checkpoint; a host run the device's.
  {
    DeviceRun first(dir.config("first", common_overrides(dir, "first")));
    first.trainer->train_step();
    first.trainer->train_step();
    first.trainer->save_checkpoint();
  }
  testing_support::InProcessRun host_resumed(
      dir.config("host-resumed", common_overrides(dir, "first")));
  ASSERT_TRUE(host_resumed.trainer->resume("auto"));
  DeviceRun device_resumed(dir.config("device-resumed", common_overrides(dir, "whole")));
  ASSERT_TRUE(device_resumed.trainer->resume(dir / "whole-ckpt/step_00000002"));
  const auto whole_losses = losses(dir / "whole/metrics.jsonl");
  for (int64_t step = 3; step <= 4; ++step) {
    const double host_loss = host_resumed.trainer->train_step().loss;
    const double device_loss = device_resumed.trainer->train_step().loss;
    EXPECT_EQ(host_loss, device_loss) << "step " << step;
    // The uninterrupted run logged the same loss (metrics.jsonl prints %.9g).
    char logged[64];
    std::snprintf(logged, sizeof logged, "{\"step\": %lld, \"loss\": %.9g",
                  static_cast<long long>(step), device_loss);
    EXPECT_EQ(whole_losses[static_cast<size_t>(step - 1)].rfind(logged, 0), 0u)
        << whole_losses[static_cast<size_t>(step - 1)] << " vs " << logged;
  }
  EXPECT_TRUE(testing_support::same_bytes(whole.trainer->host_params().flat,
                                          device_resumed.trainer->host_params().flat));
}

TEST(EmulatedDevice, NonFiniteGradientIsNamedFromDeviceTensors) {
  CorpusDir dir;
  DeviceRun run(dir.config("run", testing_support::diverging({"train.on_nonfinite=skip_step",
                                                              "train.max_skipped_steps=1"})));
  run.trainer->train_step();  // finite; blows the weights up
  run.trainer->train_step();  // skipped
  EXPECT_NE(run.log.str().find("(first: gradient of "), std::string::npos) << run.log.str();
  EXPECT_NE(run.log.str().find("update skipped"), std::string::npos);
  EXPECT_THROW(run.trainer->train_step(), runtime::Error);
}

}  // namespace
}  // namespace trainer

namespace trainer {
namespace {

using testing_support::CorpusDir;

// bf16 on the emulated device (Note [Emulated bf16]): the model reads bf16 weights and keeps
// bf16 activations, the optimizer updates fp32 master weights.
std::vector<std::string> bf16(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), {"train.device=cuda", "train.precision=bf16"});
  return overrides;
}

// The step's gradients (fp32, on the device) as host floats.
std::vector<float> gradients(const Trainer& trainer) {
  runtime::CpuAllocator host;
  const runtime::Tensor& grads = trainer.grads().flat;
  const runtime::Tensor copy =
      runtime::Tensor::empty(host, grads.shape(), grads.dtype(), runtime::MemoryCategory::comm);
  runtime::ops::download(copy, grads);
  return std::vector<float>(copy.f32(), copy.f32() + copy.numel());
}

TEST(EmulatedDeviceBf16, EveryRecomputePlanIsBitIdenticalAndPeaksAsPredicted) {
  CorpusDir dir;
  const std::vector<std::vector<std::string>> plans = {
      {"recompute.granularity=none"},
      {"recompute.granularity=full", "recompute.method=uniform", "recompute.num_layers=1"},
      {"recompute.granularity=full", "recompute.method=uniform", "recompute.num_layers=2"},
      {"recompute.granularity=full", "recompute.method=block", "recompute.num_layers=1"},
      {"recompute.granularity=selective", "recompute.modules=[core_attn]"},
      {"recompute.granularity=selective", "recompute.modules=[act, mlp]"},
      {"recompute.granularity=selective", "recompute.modules=[core_attn, act, layernorm, mlp]"},
  };
  double reference_loss = 0;
  std::vector<float> reference_grads;
  for (const auto& plan : plans) {
    std::vector<std::string> overrides = {"model.hidden_dropout=0.1", "model.attention_dropout=0.1",
                                          "optimizer.clip_grad=0"};
    overrides.insert(overrides.end(), plan.begin(), plan.end());
    DeviceRun run(dir.config("run", bf16(overrides)));
    EXPECT_EQ(run.trainer->params().flat.dtype(), runtime::DType::bf16);
    EXPECT_EQ(run.trainer->master_params().flat.dtype(), runtime::DType::f32);
    const StepMetrics m = run.trainer->train_step();
    EXPECT_EQ(m.memory[runtime::MemoryCategory::activation].peak, m.predicted_activation_peak)
        << plan.back();
    const std::vector<float> grads = gradients(*run.trainer);
    if (reference_grads.empty()) {
      reference_loss = m.loss, reference_grads = grads;
      continue;
    }
    EXPECT_EQ(m.loss, reference_loss) << plan.back();
    EXPECT_TRUE(grads == reference_grads) << plan.back();
  }
}

// bf16 activations halve the activation memory of fp32 except the f32 statistics and u8
// masks: the measured peak says so, and equals the memory model's.
TEST(EmulatedDeviceBf16, ActivationsAreHalfTheFp32Bytes) {
  CorpusDir dir;
  DeviceRun fp32(dir.config("fp32", {"train.device=cuda", "train.precision=fp32"}));
  DeviceRun half(dir.config("bf16", bf16({})));
  const int64_t fp32_peak =
      fp32.trainer->train_step().memory[runtime::MemoryCategory::activation].peak;
  const StepMetrics m = half.trainer->train_step();
  const int64_t bf16_peak = m.memory[runtime::MemoryCategory::activation].peak;
  EXPECT_EQ(bf16_peak, m.predicted_activation_peak);
  std::printf("[ memory ] activation peak: fp32 %lld bytes, bf16 %lld (%.3fx)\n",
              static_cast<long long>(fp32_peak), static_cast<long long>(bf16_peak),
              static_cast<double>(bf16_peak) / static_cast<double>(fp32_peak));
  EXPECT_LT(bf16_peak, fp32_peak * 6 / 10);
  EXPECT_GT(bf16_peak, fp32_peak * 4 / 10);
}

TEST(EmulatedDeviceBf16, FollowsTheFp32LossCurve) {
  CorpusDir dir(60'000);
  const std::vector<std::string> common = {"train.steps=150", "optimizer.lr=3e-3",
                                           "optimizer.lr_warmup_steps=10"};
  testing_support::InProcessRun host(dir.config("fp32", common));
  DeviceRun device(dir.config("bf16", bf16(common)));
  std::vector<double> fp32_losses, bf16_losses;
  for (int step = 0; step < 150; ++step) {
    fp32_losses.push_back(host.trainer->train_step().loss);
    bf16_losses.push_back(device.trainer->train_step().loss);
  }
  double gap = 0;
  for (size_t i = 120; i < 150; ++i) gap += std::abs(bf16_losses[i] - fp32_losses[i]) / 30;
  std::printf(
      "[ curve ] fp32 %.4f -> %.4f, bf16 %.4f -> %.4f, mean |gap| over steps 121-150 %.4f\n",
      fp32_losses.front(), fp32_losses.back(), bf16_losses.front(), bf16_losses.back(), gap);
  EXPECT_LT(fp32_losses.back(), fp32_losses.front() - 1.0);  // it learned
  EXPECT_LT(gap, 0.05);
}

TEST(EmulatedDeviceBf16, ResumeIsBitExact) {
  CorpusDir dir;
  const std::vector<std::string> common =
      bf16({"train.steps=4", "model.hidden_dropout=0.1", "checkpoint.dir=" + dir / "ckpt"});
  DeviceRun whole(dir.config("whole", common));
  std::vector<double> losses;
  for (int step = 0; step < 4; ++step) losses.push_back(whole.trainer->train_step().loss);
  {
    DeviceRun first(dir.config("first", common));
    first.trainer->train_step();
    first.trainer->train_step();
    first.trainer->save_checkpoint();
  }
  DeviceRun resumed(dir.config("resumed", common));
  ASSERT_TRUE(resumed.trainer->resume("auto"));
  EXPECT_EQ(resumed.trainer->train_step().loss, losses[2]);
  EXPECT_EQ(resumed.trainer->train_step().loss, losses[3]);
  EXPECT_TRUE(testing_support::same_bytes(whole.trainer->host_params().flat,
                                          resumed.trainer->host_params().flat));
}

}  // namespace
}  // namespace trainer
