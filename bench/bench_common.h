// Shared by the CPU benchmarks: a model with random tokens and a full training
// step (forward, backward, clip, AdamW) timed under a recompute plan.
#pragma once

#include <chrono>
#include <random>

#include "model/flops.h"
#include "recompute/executor.h"
#include "recompute/memory_model.h"
#include "trainer/optimizer.h"

namespace bench {

inline model::GptConfig gpt(int64_t layers, int64_t hidden, int64_t heads, int64_t vocab,
                            int64_t seq) {
  model::GptConfig c;
  c.num_layers = layers;
  c.hidden_size = hidden;
  c.num_attention_heads = heads;
  c.vocab_size = vocab;
  c.seq_length = seq;
  c.hidden_dropout = c.attention_dropout = 0.1f;
  return c;
}

struct StepResult {
  double step_ms = 0;            // mean over the timed steps
  double model_gflops = 0;       // model FLOPs per second / 1e9
  int64_t model_flops = 0;       // per step
  int64_t recompute_flops = 0;   // per step
  int64_t activation_peak = 0;   // measured, bytes
  int64_t predicted_peak = 0;    // memory model, bytes
};

class BenchModel {
 public:
  BenchModel(const model::GptConfig& config, int64_t micro_batch)
      : config_(config), micro_batch_(micro_batch) {
    params_ = model::GptParams::allocate(allocator_, config, runtime::MemoryCategory::param);
    model::init_params(params_, config, 1);
    grads_ = model::GptParams::allocate(allocator_, config, runtime::MemoryCategory::grad);
    adamw_ = std::make_unique<trainer::AdamW>(params_, allocator_);
  }

  int64_t tokens_per_step() const { return config_.seq_length * micro_batch_; }

  StepResult run(const recompute::RecomputePlan& plan, int warmup, int steps) {
    using Clock = std::chrono::steady_clock;
    recompute::ChunkExecutor chunk(config_, params_, grads_, plan, micro_batch_, allocator_);
    const model::LayerDims dims = model::layer_dims(config_, micro_batch_, true);
    StepResult r;
    r.model_flops = 3 * (config_.num_layers * model::layer_forward_flops(dims).total() +
                         model::head_forward_flops(dims, config_.padded_vocab()));
    r.predicted_peak = recompute::predict_activation_memory(config_, dims, plan).peak;
    const float scale = 1.0f / static_cast<float>(tokens_per_step());
    double total = 0;
    for (int s = 0; s < warmup + steps; ++s) {
      allocator_.reset_peaks();
      chunk.reset_recompute_flops();
      const auto start = Clock::now();
      grads_.flat.zero_();
      chunk.forward_step(microbatch(), {1, s + 1});
      chunk.backward_step(scale);
      const double norm = trainer::global_grad_norm(grads_);
      trainer::clip_gradients(grads_, norm, 1.0);
      adamw_->step(params_, grads_, optimizer_, 1e-4, s + 1);
      if (s >= warmup) total += std::chrono::duration<double>(Clock::now() - start).count();
      r.recompute_flops = chunk.recompute_flops();
      r.activation_peak = allocator_.stats()[runtime::MemoryCategory::activation].peak;
    }
    r.step_ms = total / steps * 1e3;
    r.model_gflops = static_cast<double>(r.model_flops) / (total / steps) / 1e9;
    return r;
  }

 private:
  recompute::Microbatch microbatch() {
    const int64_t T = config_.seq_length, B = micro_batch_;
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config_.vocab_size) - 1);
    recompute::Microbatch mb;
    mb.tokens = runtime::Tensor::empty(allocator_, {T, B}, runtime::DType::i32,
                                       runtime::MemoryCategory::activation);
    mb.targets = runtime::Tensor::empty(allocator_, {T, B}, runtime::DType::i32,
                                        runtime::MemoryCategory::activation);
    for (int64_t i = 0; i < T * B; ++i) {
      mb.tokens.i32()[i] = token(rng_);
      mb.targets.i32()[i] = token(rng_);
    }
    return mb;
  }

  model::GptConfig config_;
  int64_t micro_batch_;
  runtime::CpuAllocator allocator_;
  model::GptParams params_, grads_;
  std::unique_ptr<trainer::AdamW> adamw_;
  trainer::OptimizerConfig optimizer_;
  std::mt19937 rng_{1};
};

}  // namespace bench
