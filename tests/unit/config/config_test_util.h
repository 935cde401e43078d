// Helpers of the config tests: run a parse or a validation and check the
// ConfigError a user would read (its YAML path, and the values in its message),
// plus a field-by-field comparison of two Configs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "trainer/config/config.h"

namespace trainer::config_test {

// The defaults plus a dataset path, the one key without a usable default.
inline Config valid_config() {
  Config config;
  config.data.path = "data/corpus";
  config.train.precision = Precision::fp32;  // what parsing resolves auto to on cpu
  return config;
}

// A valid config in which every field differs from its default. The same values
// are spelled out as YAML in test_config_parse.cpp (kEveryKeyYaml).
inline Config non_default_config() {
  Config config;
  config.model.num_layers = 6;
  config.model.hidden_size = 96;
  config.model.num_attention_heads = 4;
  config.model.ffn_hidden_size = 200;
  config.model.seq_length = 48;
  config.model.max_position_embeddings = 96;
  config.model.vocab_size = 1000;
  config.model.make_vocab_size_divisible_by = 64;
  config.model.hidden_dropout = 0.123456789f;
  config.model.attention_dropout = 0.25f;
  config.model.init_method_std = 0.0173f;
  config.model.layernorm_epsilon = 1e-6f;
  config.model.activation = model::Activation::gelu;
  config.model.sliding_window = 7;
  config.train.steps = 50;
  config.train.micro_batch_size = 2;
  config.train.global_batch_size = 12;
  config.train.seed = std::numeric_limits<uint64_t>::max();
  config.train.log_interval = 5;
  config.train.eval_interval = 10;
  config.train.eval_iters = 3;
  config.train.exit_duration_minutes = 90.5;
  config.train.device = Device::cuda;
  config.train.precision = Precision::bf16;
  config.optimizer.lr = 3e-4f;
  config.optimizer.min_lr = 3e-5f;
  config.optimizer.weight_decay = 0.1f;
  config.optimizer.adam_beta1 = 0.85f;
  config.optimizer.adam_beta2 = 0.95f;
  config.optimizer.adam_eps = 1e-7f;
  config.optimizer.clip_grad = 0.5f;
  config.optimizer.lr_warmup_steps = 10;
  config.optimizer.lr_decay_steps = 40;
  config.optimizer.lr_decay_style = DecayStyle::wsd;
  config.optimizer.lr_wsd_decay_steps = 20;
  config.optimizer.lr_wsd_decay_style = WsdDecayStyle::minus_sqrt;
  config.data.path = "data/my corpus: v2";
  config.data.split = {0.1, 0.25, 7};
  config.data.shuffle = true;
  config.parallel.tensor = 2;
  config.parallel.pipeline = 3;
  config.parallel.data = 2;
  config.parallel.virtual_pipeline = 1;  // must stay 1 with layers_per_stage
  config.parallel.sequence_parallel = true;
  config.parallel.layers_per_stage = {1, 2, 3};
  config.parallel.backend = parallel::CommBackend::nccl;
  config.output.dir = "runs/x #1";
  config.output.export_model = false;
  config.output.tensorboard = true;
  config.train.trace = {.start_step = 3, .steps = 2};
  config.train.guard = {
      .action = GuardAction::skip_step, .loss_spike_factor = 2.5, .window = 20, .max_rewinds = 1};
  config.train.inject = {.step = 9, .scale_loss = 1e3};
  config.data.skip_batches = {{.first = 3, .last = 4}, {.first = 10, .last = 10}};
  config.targets.min_tokens_per_s = 1500.5;
  config.targets.max_memory_gib = 0.75;
  config.targets.max_loss = {.at_step = 40, .value = 2.25};
  config.targets.window = 7;
  config.targets.throughput_drift_fraction = 0.3;
  return config;
}

// Succeeds when `run` throws a ConfigError at exactly `path` whose message
// contains every piece.
template <class Run>
::testing::AssertionResult throws_config_error(Run&& run, const std::string& path,
                                               std::initializer_list<std::string> pieces) {
  try {
    run();
  } catch (const runtime::ConfigError& error) {
    const std::string message = error.what();
    if (error.path() != path) {
      return ::testing::AssertionFailure()
             << "path '" << error.path() << "', expected '" << path << "', in: " << message;
    }
    for (const std::string& piece : pieces) {
      if (message.find(piece) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks '" << piece << "': " << message;
      }
    }
    return ::testing::AssertionSuccess() << message;
  }
  return ::testing::AssertionFailure() << "no ConfigError was thrown";
}

inline ::testing::AssertionResult rejected(const Config& config, const std::string& path,
                                           std::initializer_list<std::string> pieces) {
  return throws_config_error([&] { validate_config(config); }, path, pieces);
}

inline ::testing::AssertionResult parse_rejected(const std::string& yaml,
                                                 const std::vector<std::string>& overrides,
                                                 const std::string& path,
                                                 std::initializer_list<std::string> pieces) {
  return throws_config_error([&] { parse_config(yaml, "test.yaml", overrides); }, path, pieces);
}

inline ::testing::AssertionResult accepted(const Config& config) {
  try {
    validate_config(config);
  } catch (const runtime::ConfigError& error) {
    return ::testing::AssertionFailure() << "rejected: " << error.what();
  }
  return ::testing::AssertionSuccess();
}

// Floats compare exactly: a round trip must reproduce every bit.
inline void expect_same_config(const Config& actual, const Config& expected) {
  EXPECT_EQ(actual.model.num_layers, expected.model.num_layers);
  EXPECT_EQ(actual.model.hidden_size, expected.model.hidden_size);
  EXPECT_EQ(actual.model.num_attention_heads, expected.model.num_attention_heads);
  EXPECT_EQ(actual.model.ffn_hidden_size, expected.model.ffn_hidden_size);
  EXPECT_EQ(actual.model.seq_length, expected.model.seq_length);
  EXPECT_EQ(actual.model.max_position_embeddings, expected.model.max_position_embeddings);
  EXPECT_EQ(actual.model.vocab_size, expected.model.vocab_size);
  EXPECT_EQ(actual.model.make_vocab_size_divisible_by, expected.model.make_vocab_size_divisible_by);
  EXPECT_EQ(actual.model.hidden_dropout, expected.model.hidden_dropout);
  EXPECT_EQ(actual.model.attention_dropout, expected.model.attention_dropout);
  EXPECT_EQ(actual.model.init_method_std, expected.model.init_method_std);
  EXPECT_EQ(actual.model.layernorm_epsilon, expected.model.layernorm_epsilon);
  EXPECT_EQ(actual.model.activation, expected.model.activation);
  EXPECT_EQ(actual.model.sliding_window, expected.model.sliding_window);
  EXPECT_EQ(actual.train.steps, expected.train.steps);
  EXPECT_EQ(actual.train.micro_batch_size, expected.train.micro_batch_size);
  EXPECT_EQ(actual.train.global_batch_size, expected.train.global_batch_size);
  EXPECT_EQ(actual.train.seed, expected.train.seed);
  EXPECT_EQ(actual.train.log_interval, expected.train.log_interval);
  EXPECT_EQ(actual.train.eval_interval, expected.train.eval_interval);
  EXPECT_EQ(actual.train.eval_iters, expected.train.eval_iters);
  EXPECT_EQ(actual.train.exit_duration_minutes, expected.train.exit_duration_minutes);
  EXPECT_EQ(actual.train.device, expected.train.device);
  EXPECT_EQ(actual.train.precision, expected.train.precision);
  EXPECT_EQ(actual.optimizer.lr, expected.optimizer.lr);
  EXPECT_EQ(actual.optimizer.min_lr, expected.optimizer.min_lr);
  EXPECT_EQ(actual.optimizer.weight_decay, expected.optimizer.weight_decay);
  EXPECT_EQ(actual.optimizer.adam_beta1, expected.optimizer.adam_beta1);
  EXPECT_EQ(actual.optimizer.adam_beta2, expected.optimizer.adam_beta2);
  EXPECT_EQ(actual.optimizer.adam_eps, expected.optimizer.adam_eps);
  EXPECT_EQ(actual.optimizer.clip_grad, expected.optimizer.clip_grad);
  EXPECT_EQ(actual.optimizer.lr_warmup_steps, expected.optimizer.lr_warmup_steps);
  EXPECT_EQ(actual.optimizer.lr_decay_steps, expected.optimizer.lr_decay_steps);
  EXPECT_EQ(actual.optimizer.lr_decay_style, expected.optimizer.lr_decay_style);
  EXPECT_EQ(actual.optimizer.lr_wsd_decay_steps, expected.optimizer.lr_wsd_decay_steps);
  EXPECT_EQ(actual.optimizer.lr_wsd_decay_style, expected.optimizer.lr_wsd_decay_style);
  EXPECT_EQ(actual.data.path, expected.data.path);
  EXPECT_EQ(actual.data.blend, expected.data.blend);
  EXPECT_EQ(actual.data.split, expected.data.split);
  EXPECT_EQ(actual.data.shuffle, expected.data.shuffle);
  EXPECT_EQ(actual.parallel.tensor, expected.parallel.tensor);
  EXPECT_EQ(actual.parallel.pipeline, expected.parallel.pipeline);
  EXPECT_EQ(actual.parallel.data, expected.parallel.data);
  EXPECT_EQ(actual.parallel.virtual_pipeline, expected.parallel.virtual_pipeline);
  EXPECT_EQ(actual.parallel.sequence_parallel, expected.parallel.sequence_parallel);
  EXPECT_EQ(actual.parallel.layers_per_stage, expected.parallel.layers_per_stage);
  EXPECT_EQ(actual.parallel.backend, expected.parallel.backend);
  EXPECT_EQ(actual.output.dir, expected.output.dir);
  EXPECT_EQ(actual.output.export_model, expected.output.export_model);
  EXPECT_EQ(actual.train.guard.action, expected.train.guard.action);
  EXPECT_EQ(actual.train.guard.loss_spike_factor, expected.train.guard.loss_spike_factor);
  EXPECT_EQ(actual.train.guard.window, expected.train.guard.window);
  EXPECT_EQ(actual.train.guard.max_rewinds, expected.train.guard.max_rewinds);
  EXPECT_EQ(actual.train.inject.step, expected.train.inject.step);
  EXPECT_EQ(actual.train.inject.scale_loss, expected.train.inject.scale_loss);
  EXPECT_EQ(actual.data.skip_batches, expected.data.skip_batches);
  EXPECT_EQ(actual.targets.min_tokens_per_s, expected.targets.min_tokens_per_s);
  EXPECT_EQ(actual.targets.max_memory_gib, expected.targets.max_memory_gib);
  EXPECT_EQ(actual.targets.max_loss.at_step, expected.targets.max_loss.at_step);
  EXPECT_EQ(actual.targets.max_loss.value, expected.targets.max_loss.value);
  EXPECT_EQ(actual.targets.window, expected.targets.window);
  EXPECT_EQ(actual.targets.action, expected.targets.action);
  EXPECT_EQ(actual.targets.throughput_drift_fraction, expected.targets.throughput_drift_fraction);
}

}  // namespace trainer::config_test
