// `trainer generate` on a CUDA device against the host: the key/value-cache decoder's logits for
// a prompt and then one token at a time (the same tokens fed to both) within 1e-4 of the host's,
// for the GPT-2 block (learned positions, LayerNorm, GELU) and the Llama block (RoPE, RMSNorm,
// SwiGLU, 2 kv groups of 2 heads, untied head) of the model tests' tiny configs; and the sampled
// tokens the same, greedy and drawn. Skips without a device.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/decoder.h"
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/ops.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/model/model_test_util.h"
#include "trainer/generate/generate_command.h"

namespace {

using gpu_test::host_values;
using runtime::MemoryCategory;

class GpuDecoder : public gpu_test::GpuBackendTest {
 protected:
  void SetUp() override {
    GpuBackendTest::SetUp();
    if (IsSkipped()) return;
    context_->use_allocator(&device_);
  }
  void TearDown() override {
    if (context_) context_->use_allocator(nullptr);
    GpuBackendTest::TearDown();
  }

  // The model of `config` (32 positions: a prompt and new tokens fit the learned ones) with
  // init_params' values, on the host and on the device.
  void load(const model::GptConfig& config) {
    config_ = config;
    config_.seq_length = 32;
    host_params_ = model::GptParams::allocate(host_, config_, MemoryCategory::param);
    model::init_params(host_params_, config_, 21);
    device_params_ = model::GptParams::allocate(device_, config_, MemoryCategory::param);
    runtime::ops::upload(device_params_.flat, host_params_.flat);
  }

  // The prompt, then each of `next` one at a time, through both decoders: the worst logit
  // difference relative to the host's largest |logit| of that call.
  double worst_logit_error(const std::vector<int32_t>& prompt, const std::vector<int32_t>& next) {
    model::Decoder on_host(host_params_, config_, host_);
    model::Decoder on_device(device_params_, config_, device_);
    const int64_t capacity = static_cast<int64_t>(prompt.size() + next.size());
    model::KvCache host_cache = on_host.new_cache(capacity);
    model::KvCache device_cache = on_device.new_cache(capacity);
    double worst = 0;
    auto compare = [&](std::span<const int32_t> tokens) {
      const runtime::Tensor expected = on_host.forward(host_cache, tokens);
      const std::vector<float> got = host_values(on_device.forward(device_cache, tokens));
      EXPECT_EQ(static_cast<int64_t>(got.size()), expected.numel());
      double scale = 0, error = 0;
      for (int64_t i = 0; i < expected.numel(); ++i) {
        scale = std::max(scale, std::abs(static_cast<double>(expected.f32()[i])));
        error = std::max(error, std::abs(static_cast<double>(got[static_cast<size_t>(i)]) -
                                         expected.f32()[i]));
      }
      worst = std::max(worst, error / scale);
    };
    compare(prompt);
    for (const int32_t& token : next) compare(std::span(&token, 1));
    return worst;
  }

  // The 10 tokens generate_sample draws on the host and on the device at `temperature` (0:
  // greedy) among the `top_k` largest logits.
  void expect_same_samples(float temperature, int64_t top_k) {
    trainer::SamplingOptions sampling;
    sampling.max_new_tokens = 10;
    sampling.temperature = temperature;
    sampling.top_k = top_k;
    sampling.seed = 7;
    const std::vector<int32_t> prompt = {3, 14, 15, 9, 26};  // below the vocabulary of 37
    const trainer::Sample host =
        trainer::generate_sample(host_params_, config_, prompt, sampling, nullptr);
    const trainer::Sample device =
        trainer::generate_sample(device_params_, config_, prompt, sampling, nullptr, &device_);
    EXPECT_EQ(device.generated, host.generated) << "temperature " << sampling.temperature;
    EXPECT_EQ(static_cast<int64_t>(host.generated.size()), sampling.max_new_tokens);
  }

  runtime::CpuAllocator host_;
  runtime::cuda::CudaAllocator device_;
  model::GptConfig config_;
  model::GptParams host_params_, device_params_;
};

TEST_F(GpuDecoder, Gpt2LogitsAndSamplesMatchTheHost) {
  load(testing_support::tiny_config(/*dropout=*/0.f));
  EXPECT_LT(worst_logit_error({1, 2, 3, 4, 5, 6, 7}, {8, 36, 0, 22}), 1e-4);
  expect_same_samples(0.f, 0);
  expect_same_samples(1.f, 20);
}

TEST_F(GpuDecoder, LlamaLogitsAndSamplesMatchTheHost) {
  load(testing_support::tiny_llama_config(/*dropout=*/0.f));
  EXPECT_LT(worst_logit_error({1, 2, 3, 4, 5, 6, 7}, {8, 36, 0, 22}), 1e-4);
  expect_same_samples(0.f, 0);
  expect_same_samples(1.f, 20);
}

}  // namespace
