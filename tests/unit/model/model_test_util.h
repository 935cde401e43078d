// A tiny GPT with random tokens for model-level tests: params, grads, one
// executor per plan, and helpers that run a training forward/backward.
#pragma once

#include <optional>
#include <random>
#include <vector>

#include "model/gpt_params.h"
#include "recompute/executor.h"

namespace testing_support {

inline model::GptConfig tiny_config(float dropout = 0.1f) {
  model::GptConfig c;
  c.num_layers = 4;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.seq_length = 8;
  c.vocab_size = 37;
  c.make_vocab_size_divisible_by = 16;  // padded to 48: exercises the padding
  c.hidden_dropout = dropout;
  c.attention_dropout = dropout;
  return c;
}

// The tiny model as a Llama block: RMSNorm, SwiGLU, RoPE, 4 query heads sharing 2 key/value
// heads, no biases, an untied head (dropout kept, so the plans' masks are exercised).
inline model::GptConfig tiny_llama_config(float dropout = 0.1f) {
  model::GptConfig c = model::architecture_defaults(model::Architecture::llama);
  const model::GptConfig gpt = tiny_config(dropout);
  c.num_layers = gpt.num_layers;
  c.hidden_size = gpt.hidden_size;
  c.num_attention_heads = 4;
  c.num_query_groups = 2;
  c.ffn_hidden_size = 24;
  c.seq_length = gpt.seq_length;
  c.vocab_size = gpt.vocab_size;
  c.make_vocab_size_divisible_by = gpt.make_vocab_size_divisible_by;
  c.hidden_dropout = dropout;
  c.attention_dropout = dropout;
  return c;
}

struct TinyModel {
  model::GptConfig config;
  int64_t micro_batch = 2;
  runtime::CpuAllocator allocator;
  model::GptParams params;
  model::GptParams grads;
  std::vector<int32_t> tokens;  // (micro_batch, seq + 1) samples, row per sample
  // With a value, the microbatch's documents end at this input token, and each attends only to
  // itself when mask_documents (Note [Document masking]) and restarts its positions at 0 when
  // reset_positions (Note [Document positions]).
  std::optional<int32_t> document_end;
  bool mask_documents = true;
  bool reset_positions = false;

  explicit TinyModel(const model::GptConfig& c, int64_t batch = 2, uint64_t seed = 7)
      : config(c), micro_batch(batch) {
    params = model::GptParams::allocate(allocator, config, runtime::MemoryCategory::param);
    model::init_params(params, config, seed);
    grads = model::GptParams::allocate(allocator, config, runtime::MemoryCategory::grad);
    grads.flat.zero_();
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocab_size) - 1);
    tokens.resize(static_cast<size_t>(micro_batch * (config.seq_length + 1)));
    for (int32_t& t : tokens) t = token(rng);
  }

  recompute::Microbatch microbatch() {
    const int64_t T = config.seq_length, B = micro_batch;
    recompute::Microbatch mb;
    mb.tokens = runtime::Tensor::empty(allocator, {T, B}, runtime::DType::i32,
                                       runtime::MemoryCategory::activation);
    mb.targets = runtime::Tensor::empty(allocator, {T, B}, runtime::DType::i32,
                                        runtime::MemoryCategory::activation);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T; ++t) {
        mb.tokens.i32()[t * B + b] = tokens[static_cast<size_t>(b * (T + 1) + t)];
        mb.targets.i32()[t * B + b] = tokens[static_cast<size_t>(b * (T + 1) + t + 1)];
      }
    }
    if (!document_end) return mb;
    const runtime::Tensor starts = runtime::Tensor::empty(allocator, {T, B}, runtime::DType::i32,
                                                          runtime::MemoryCategory::activation);
    for (int64_t b = 0; b < B; ++b) {
      int32_t start = 0;  // after the last document end before t
      for (int64_t t = 0; t < T; ++t) {
        starts.i32()[t * B + b] = start;
        if (tokens[static_cast<size_t>(b * (T + 1) + t)] == *document_end)
          start = static_cast<int32_t>(t + 1);
      }
    }
    if (mask_documents) mb.document_starts = starts;
    if (reset_positions) mb.position_starts = starts;
    return mb;
  }

  float loss_scale() const { return 1.0f / static_cast<float>(micro_batch * config.seq_length); }

  // One training forward + backward under `plan`; returns the mean loss and
  // leaves the gradients in `grads` (zeroed first).
  double forward_backward(const recompute::RecomputePlan& plan, int64_t step = 1) {
    grads.flat.zero_();
    recompute::ChunkExecutor chunk(config, params, grads, plan, micro_batch, allocator);
    const double sum = chunk.forward_step(microbatch(), {1234, step});
    chunk.backward_step(loss_scale());
    return sum * loss_scale();
  }
};

}  // namespace testing_support
