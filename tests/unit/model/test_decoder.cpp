// The key/value-cache decoder: one token at a time through the cache gives the logits of the full
// forward at every position, and the full forward's cross entropy is the training forward's loss,
// for a GPT-2 block, a Llama block with grouped-query attention, and one with Qwen2's q, k and v
// biases.
#include <gtest/gtest.h>

#include <cmath>

#include "model/decoder.h"
#include "model_test_util.h"
#include "runtime/error.h"

namespace {

using testing_support::TinyModel;

// The logits (T, padded_vocab) of the first T tokens of the sample as one vector.
std::vector<float> logits_of(const runtime::Tensor& logits) {
  return {logits.f32(), logits.f32() + logits.numel()};
}

// Every position's logits, fed one token at a time through the cache.
std::vector<float> cached_logits(model::Decoder& decoder, const std::vector<int32_t>& tokens) {
  model::KvCache cache = decoder.new_cache(static_cast<int64_t>(tokens.size()));
  std::vector<float> all;
  for (const int32_t token : tokens) {
    const std::vector<float> step = logits_of(decoder.forward(cache, std::span(&token, 1)));
    all.insert(all.end(), step.begin(), step.end());
  }
  EXPECT_EQ(cache.length, static_cast<int64_t>(tokens.size()));
  return all;
}

// Mean cross entropy of the logits (T, padded) against the next tokens, over the real vocabulary.
double mean_cross_entropy(const std::vector<float>& logits, const std::vector<int32_t>& sample,
                          const model::GptConfig& config) {
  const int64_t T = config.seq_length, padded = config.padded_vocab();
  double sum = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits.data() + t * padded;
    double max = row[0], sum_exp = 0;
    for (int64_t v = 0; v < config.vocab_size; ++v) max = std::max<double>(max, row[v]);
    for (int64_t v = 0; v < config.vocab_size; ++v) sum_exp += std::exp(row[v] - max);
    sum += max + std::log(sum_exp) - row[sample[static_cast<size_t>(t + 1)]];
  }
  return sum / static_cast<double>(T);
}

// Every bias of the model is set to small distinct values first: init_params zeroes them, and a
// decoder that dropped one would pass.
void expect_cache_matches_full_forward(const model::GptConfig& config) {
  TinyModel tiny(config, /*batch=*/1);
  for (const model::NamedParam& p : tiny.params.named) {
    // Biases (zero at init) and the q and k norms' weights (one at init, and equal) set apart.
    const bool k_norm = p.name.ends_with("k_layernorm.weight");
    if (k_norm || p.name.ends_with("q_layernorm.weight")) {
      for (int64_t i = 0; i < p.tensor.numel(); ++i)
        p.tensor.f32()[i] = 1.f + 0.5f * std::sin(static_cast<float>(i) + (k_norm ? 2.f : 1.f));
    }
    if (!p.name.ends_with(".bias")) continue;
    for (int64_t i = 0; i < p.tensor.numel(); ++i)
      p.tensor.f32()[i] = 0.05f * std::sin(static_cast<float>(i) + 1.f);
  }
  const std::vector<int32_t> inputs(tiny.tokens.begin(), tiny.tokens.end() - 1);  // T tokens
  model::Decoder decoder(tiny.params, tiny.config, tiny.allocator);

  model::KvCache full_cache = decoder.new_cache(config.seq_length);
  const std::vector<float> full = logits_of(decoder.forward(full_cache, inputs));
  const std::vector<float> cached = cached_logits(decoder, inputs);
  ASSERT_EQ(full.size(), cached.size());
  double worst = 0;
  for (size_t i = 0; i < full.size(); ++i)
    worst = std::max<double>(worst, std::abs(full[i] - cached[i]));
  EXPECT_LT(worst, 1e-5) << "largest |cached - full| logit difference";

  // A prompt of 3 tokens at once, then the rest one by one: the same logits again.
  model::KvCache mixed = decoder.new_cache(config.seq_length);
  std::vector<float> mixed_logits = logits_of(decoder.forward(mixed, std::span(inputs).first(3)));
  for (size_t t = 3; t < inputs.size(); ++t) {
    const std::vector<float> step =
        logits_of(decoder.forward(mixed, std::span(inputs).subspan(t, 1)));
    mixed_logits.insert(mixed_logits.end(), step.begin(), step.end());
  }
  for (size_t i = 0; i < full.size(); ++i) ASSERT_NEAR(mixed_logits[i], full[i], 1e-5) << i;

  // The full forward is the training forward (dropout off): the same mean loss.
  const double training_loss =
      tiny.forward_backward(recompute::RecomputePlan::uniform(config.num_layers, {}));
  EXPECT_NEAR(mean_cross_entropy(full, tiny.tokens, config), training_loss, 1e-5);
}

TEST(Decoder, Gpt2CacheGivesTheFullForwardsLogits) {
  expect_cache_matches_full_forward(testing_support::tiny_config(/*dropout=*/0.f));
}

TEST(Decoder, LlamaGroupedQueryCacheGivesTheFullForwardsLogits) {
  const model::GptConfig config = testing_support::tiny_llama_config(/*dropout=*/0.f);
  ASSERT_EQ(config.group_size(), 2);
  expect_cache_matches_full_forward(config);
}

TEST(Decoder, Qwen2BiasedQkvCacheGivesTheFullForwardsLogits) {
  model::GptConfig config = testing_support::tiny_llama_config(/*dropout=*/0.f);
  config.add_qkv_bias = true;
  expect_cache_matches_full_forward(config);
}

TEST(Decoder, WideHeadsCacheGivesTheFullForwardsLogits) {
  model::GptConfig config = testing_support::tiny_llama_config(/*dropout=*/0.f);
  config.kv_channels = 3 * config.head_dim();  // heads three times as wide as hidden / heads
  expect_cache_matches_full_forward(config);
}

// Qwen3's q and k norms, on weights set apart from each other (expect_cache_matches_full_forward),
// so a decoder that swapped them would differ from the training forward.
TEST(Decoder, Qwen3NormsCacheGivesTheFullForwardsLogits) {
  model::GptConfig config = testing_support::tiny_llama_config(/*dropout=*/0.f);
  config.qk_layernorm = true;
  config.kv_channels = 2 * config.head_dim();
  expect_cache_matches_full_forward(config);
}

// YaRN's scaling: the decoder's scores take the attention factor squared as training's do.
TEST(Decoder, YarnScaledCacheGivesTheFullForwardsLogits) {
  model::GptConfig config = testing_support::tiny_llama_config(/*dropout=*/0.f);
  config.rope_scaling = {.type = runtime::RopeScalingType::yarn,
                         .factor = 4.f,
                         .original_max_position_embeddings = 4096};
  expect_cache_matches_full_forward(config);
}

// A sliding window (Mistral's): the cached keys a new token sees are its window's only, as in
// training's unfused softmax.
TEST(Decoder, SlidingWindowCacheGivesTheFullForwardsLogits) {
  model::GptConfig config = testing_support::tiny_llama_config(/*dropout=*/0.f);
  config.sliding_window = 3;
  ASSERT_GT(config.seq_length, 2 * config.sliding_window);
  expect_cache_matches_full_forward(config);
}

TEST(Decoder, BadTokensAndPositionsAreInputErrors) {
  TinyModel tiny(testing_support::tiny_config(0.f), 1);
  model::Decoder decoder(tiny.params, tiny.config, tiny.allocator);
  EXPECT_THROW(decoder.new_cache(tiny.config.seq_length + 1), runtime::InputError);
  model::KvCache cache = decoder.new_cache(2);
  const int32_t outside = static_cast<int32_t>(tiny.config.vocab_size);
  EXPECT_THROW(decoder.forward(cache, std::span(&outside, 1)), runtime::InputError);
  const std::vector<int32_t> three = {1, 2, 3};
  EXPECT_THROW(decoder.forward(cache, three), runtime::InputError);
  EXPECT_EQ(cache.length, 0);
}

}  // namespace
