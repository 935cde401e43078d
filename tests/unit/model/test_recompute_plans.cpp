// The recompute invariant (docs/recompute.md, "Bit-identical invariant"): for one seed,
// every plan gives bit-identical loss and gradients, and the measured peak of the `activation`
// category equals the memory model's prediction exactly (the host allocator
// counts requested bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "model_test_util.h"
#include "recompute/memory_model.h"

namespace {

using model::LayerRecompute;
using model::RecomputeMode;
using model::SelectiveModules;
using recompute::RecomputePlan;
using testing_support::TinyModel;

LayerRecompute selective(SelectiveModules modules) {
  return LayerRecompute{RecomputeMode::selective, modules};
}

RecomputePlan full_block(int64_t num_layers, int64_t full_layers) {
  RecomputePlan plan = RecomputePlan::uniform(num_layers, {});
  for (int64_t i = 0; i < full_layers; ++i) {
    plan.layers[static_cast<size_t>(i)] = LayerRecompute{RecomputeMode::full, {}};
    plan.group[static_cast<size_t>(i)] = i;
  }
  return plan;
}

RecomputePlan mixed_plan() {
  RecomputePlan plan = RecomputePlan::uniform(4, {});
  plan.layers[0] = plan.layers[1] = LayerRecompute{RecomputeMode::full, {}};
  plan.group[0] = plan.group[1] = 0;
  plan.layers[2] = selective({.core_attn = true, .act = true});
  plan.layers[3] = selective({.layernorm = true, .mlp = true});
  return plan;
}

struct NamedPlan {
  const char* name;
  RecomputePlan plan;
};

std::vector<NamedPlan> all_plans(int64_t L) {
  const LayerRecompute full{RecomputeMode::full, {}};
  return {
      {"none", RecomputePlan::uniform(L, {})},
      {"full uniform 1", RecomputePlan::uniform(L, full, 1)},
      {"full uniform 2", RecomputePlan::uniform(L, full, 2)},
      {"full uniform L", RecomputePlan::uniform(L, full, L)},
      {"full block 1", full_block(L, 1)},
      {"full block L-1", full_block(L, L - 1)},
      {"selective core_attn", RecomputePlan::uniform(L, selective({.core_attn = true}))},
      {"selective act", RecomputePlan::uniform(L, selective({.act = true}))},
      {"selective layernorm", RecomputePlan::uniform(L, selective({.layernorm = true}))},
      {"selective mlp", RecomputePlan::uniform(L, selective({.mlp = true}))},
      {"selective all",
       RecomputePlan::uniform(
           L, selective({.core_attn = true, .act = true, .layernorm = true, .mlp = true}))},
      {"mixed", mixed_plan()},
  };
}

// What the documents change: attention (Note [Document masking]), positions (Note [Document
// positions]), or both.
struct DocumentUse {
  bool mask = true;
  bool reset_positions = false;
};

// With a document end, the samples pack documents that end at that input token, placed at inputs
// 2, 3 and 6 of sample 0 (one-token and longer documents) and 0 and 4 of sample 1.
void pack_documents(TinyModel& model, std::optional<int32_t> document_end, DocumentUse use = {}) {
  model.document_end = document_end;
  model.mask_documents = use.mask;
  model.reset_positions = use.reset_positions;
  if (!document_end) return;
  const int64_t row = model.config.seq_length + 1;
  for (const int64_t at : {int64_t{2}, int64_t{3}, int64_t{6}, row, row + 4})
    model.tokens[static_cast<size_t>(at)] = *document_end;
}

// Every plan's loss and gradients are `none`'s, bit for bit.
void expect_plans_bit_identical(const model::GptConfig& config,
                                std::optional<int32_t> document_end = {}, DocumentUse use = {}) {
  TinyModel model(config);
  pack_documents(model, document_end, use);
  const auto plans = all_plans(model.config.num_layers);
  const double reference_loss = model.forward_backward(plans[0].plan);
  const std::vector<float> reference(model.grads.flat.f32(),
                                     model.grads.flat.f32() + model.grads.flat.numel());
  for (const NamedPlan& p : plans) {
    const double loss = model.forward_backward(p.plan);
    EXPECT_EQ(loss, reference_loss) << p.name;
    EXPECT_EQ(
        std::memcmp(model.grads.flat.f32(), reference.data(), reference.size() * sizeof(float)), 0)
        << p.name << ": gradients differ from `none`";
  }
}

// Every plan's activation peak is the memory model's, and nothing stays allocated.
void expect_peaks_predicted(const model::GptConfig& config,
                            std::optional<int32_t> document_end = {}, DocumentUse use = {}) {
  TinyModel model(config);
  pack_documents(model, document_end, use);
  const model::LayerDims dims = model::layer_dims(model.config, model.micro_batch, true);
  for (const NamedPlan& p : all_plans(model.config.num_layers)) {
    model.allocator.reset_peaks();
    ASSERT_EQ(model.allocator.stats()[runtime::MemoryCategory::activation].current, 0);
    model.forward_backward(p.plan);
    const auto stats = model.allocator.stats();
    const auto predicted = recompute::predict_activation_memory(model.config, dims, p.plan, 1, true,
                                                                true, document_end.has_value());
    EXPECT_EQ(stats[runtime::MemoryCategory::activation].peak, predicted.peak) << p.name;
    EXPECT_EQ(stats[runtime::MemoryCategory::activation].current, 0) << p.name;
  }
}

// (dropout, attention backend, architecture)
class RecomputePlans : public ::testing::TestWithParam<
                           std::tuple<float, model::AttentionBackend, model::Architecture>> {
 protected:
  model::GptConfig config() const {
    const float dropout = std::get<0>(GetParam());
    model::GptConfig c = std::get<2>(GetParam()) == model::Architecture::llama
                             ? testing_support::tiny_llama_config(dropout)
                             : testing_support::tiny_config(dropout);
    c.attention_backend = std::get<1>(GetParam());
    return c;
  }
};

TEST_P(RecomputePlans, BitIdenticalLossAndGradients) {
  expect_plans_bit_identical(config());
}

TEST_P(RecomputePlans, MeasuredActivationPeakEqualsMemoryModel) {
  expect_peaks_predicted(config());
}

// Heads wider than hidden_size / heads (model.kv_channels), and with Qwen3's q and k norms
// (model.qk_layernorm), dropout on, both backends.
void expect_wide_heads_plans(bool qk_norms) {
  for (const model::AttentionBackend backend :
       {model::AttentionBackend::unfused, model::AttentionBackend::flash}) {
    SCOPED_TRACE(model::attention_backend_name(backend));
    model::GptConfig config = testing_support::tiny_llama_config(0.1f);
    config.kv_channels = 2 * config.head_dim();
    config.qk_layernorm = qk_norms;
    config.attention_backend = backend;
    expect_plans_bit_identical(config);
    expect_peaks_predicted(config);
  }
}

TEST(RecomputePlansWideHeads, BitIdenticalWithPeaksAsPredicted) {
  expect_wide_heads_plans(/*qk_norms=*/false);
}

// The norms' stash (the heads before the norms and each head's rstd) is kept by every plan but
// full.
TEST(RecomputePlansQkNorms, BitIdenticalWithPeaksAsPredicted) {
  expect_wide_heads_plans(/*qk_norms=*/true);
}

// A sliding window shorter than the sequence (Note [Sliding window]), dropout on, both backends:
// every plan still gives none's bits, and the window changes no tensor's size.
TEST(RecomputePlansSlidingWindow, BitIdenticalWithPeaksAsPredicted) {
  for (const model::AttentionBackend backend :
       {model::AttentionBackend::unfused, model::AttentionBackend::flash}) {
    SCOPED_TRACE(model::attention_backend_name(backend));
    model::GptConfig config = testing_support::tiny_llama_config(0.1f);
    config.sliding_window = config.seq_length / 3;
    config.attention_backend = backend;
    expect_plans_bit_identical(config);
    expect_peaks_predicted(config);
  }
}

// Packed documents (Note [Document masking]) under a window that crosses their ends, dropout on,
// both backends: every plan gives none's bits, the starts are held through each microbatch's
// backward as the memory model counts them, and the documents change the loss.
TEST(RecomputePlansDocuments, BitIdenticalWithPeaksAsPredicted) {
  for (const model::AttentionBackend backend :
       {model::AttentionBackend::unfused, model::AttentionBackend::flash}) {
    SCOPED_TRACE(model::attention_backend_name(backend));
    model::GptConfig config = testing_support::tiny_llama_config(0.1f);
    config.sliding_window = config.seq_length / 2;
    config.attention_backend = backend;
    const int32_t end = 5;
    expect_plans_bit_identical(config, end);
    expect_peaks_predicted(config, end);
    const RecomputePlan none = RecomputePlan::uniform(config.num_layers, {});
    TinyModel documents(config), one_document(config);
    pack_documents(documents, end);
    pack_documents(one_document, end);
    one_document.document_end.reset();  // the same tokens, attention across the ends
    EXPECT_NE(documents.forward_backward(none), one_document.forward_backward(none));
  }
}

// Positions restarting at each document (Note [Document positions]) in GPT-2's learned position
// embedding and in Llama's rotary one, with and without the documents' mask, dropout on, flash:
// every plan gives none's bits with peaks as predicted. Without the mask the reset changes the
// loss and gradients of both (Llama's little at this random initialization, where attention is
// nearly uniform); with it, Llama's rotary scores see only position differences inside a
// document, so loss and gradients move by rounding alone.
TEST(RecomputePlansDocumentPositions, BitIdenticalWithPeaksAsPredicted) {
  for (const bool llama : {false, true}) {
    for (const bool mask : {false, true}) {
      SCOPED_TRACE(testing::Message() << (llama ? "llama" : "gpt2") << (mask ? ", masked" : ""));
      model::GptConfig config =
          llama ? testing_support::tiny_llama_config(0.1f) : testing_support::tiny_config(0.1f);
      config.attention_backend = model::AttentionBackend::flash;
      const int32_t end = 5;
      const DocumentUse reset{.mask = mask, .reset_positions = true};
      expect_plans_bit_identical(config, end, reset);
      expect_peaks_predicted(config, end, reset);
      const RecomputePlan none = RecomputePlan::uniform(config.num_layers, {});
      TinyModel restarted(config), running(config);
      pack_documents(restarted, end, reset);
      pack_documents(running, end, {.mask = mask});
      const double a = restarted.forward_backward(none), b = running.forward_backward(none);
      double largest = 0, moved = 0;  // gradients: the largest, and the largest difference
      for (int64_t i = 0; i < running.grads.flat.numel(); ++i) {
        const float x = restarted.grads.flat.f32()[i], y = running.grads.flat.f32()[i];
        largest = std::max(largest, static_cast<double>(std::abs(y)));
        moved = std::max(moved, static_cast<double>(std::abs(x - y)));
      }
      if (llama && mask) {
        EXPECT_NEAR(a, b, 1e-6 * std::abs(b));
        EXPECT_LT(moved, 1e-5 * largest);  // measured: 4.6e-11
      } else {
        EXPECT_NE(a, b);
        EXPECT_GT(moved, 1e-4 * largest);  // measured: 0.50 (gpt2), 6.6e-4 (llama)
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DropoutAndBackend, RecomputePlans,
                         ::testing::Combine(::testing::Values(0.0f, 0.1f),
                                            ::testing::Values(model::AttentionBackend::unfused,
                                                              model::AttentionBackend::flash),
                                            ::testing::Values(model::Architecture::gpt2,
                                                              model::Architecture::llama)));

// Flash attention computes what the unfused attention computes (the same dropout masks), in
// another floating-point order: loss and every gradient agree to float rounding.
TEST(FlashAttention, LossAndGradientsMatchUnfused) {
  for (const float dropout : {0.0f, 0.1f}) {
    SCOPED_TRACE(dropout);
    model::GptConfig config = testing_support::tiny_config(dropout);
    config.seq_length = 37;  // not a multiple of any tile
    TinyModel unfused(config, /*batch=*/3);
    config.attention_backend = model::AttentionBackend::flash;
    TinyModel flash(config, /*batch=*/3);
    const RecomputePlan plan = RecomputePlan::uniform(config.num_layers, {});
    const double unfused_loss = unfused.forward_backward(plan);
    const double flash_loss = flash.forward_backward(plan);
    EXPECT_NEAR(flash_loss, unfused_loss, 1e-6 * std::abs(unfused_loss));
    double max_grad = 0, max_diff = 0;
    for (int64_t i = 0; i < unfused.grads.flat.numel(); ++i) {
      const float a = unfused.grads.flat.f32()[i], b = flash.grads.flat.f32()[i];
      max_grad = std::max(max_grad, static_cast<double>(std::abs(a)));
      max_diff = std::max(max_diff, static_cast<double>(std::abs(a - b)));
    }
    EXPECT_GT(max_grad, 0.0);
    EXPECT_LE(max_diff, 1e-5 * max_grad) << "largest gradient " << max_grad;
  }
}

// Without the (heads, s, s) tensors the flash stash is linear in the sequence: doubling it
// doubles the per-layer bytes, where the unfused stash grows faster.
TEST(FlashAttention, StashIsLinearInTheSequence) {
  auto layer_bytes = [](model::AttentionBackend backend, int64_t seq) {
    model::GptConfig config = testing_support::tiny_config(0.1f);
    config.attention_backend = backend;
    config.seq_length = seq;
    return model::stash_kept_bytes(model::layer_stash_spec(model::layer_dims(config, 2, true), {}));
  };
  EXPECT_EQ(layer_bytes(model::AttentionBackend::flash, 64),
            2 * layer_bytes(model::AttentionBackend::flash, 32));
  EXPECT_GT(layer_bytes(model::AttentionBackend::unfused, 64),
            2 * layer_bytes(model::AttentionBackend::unfused, 32));
}

TEST(RecomputeMemory, FullBelowSelectiveBelowNone) {
  TinyModel model(testing_support::tiny_config(0.1f));
  const int64_t L = model.config.num_layers;
  const model::LayerDims dims = model::layer_dims(model.config, model.micro_batch, true);
  auto peak = [&](const RecomputePlan& plan) {
    return recompute::predict_activation_memory(model.config, dims, plan).peak;
  };
  const int64_t none = peak(RecomputePlan::uniform(L, {}));
  const int64_t sel = peak(RecomputePlan::uniform(L, selective({.core_attn = true})));
  const int64_t full = peak(RecomputePlan::uniform(L, LayerRecompute{RecomputeMode::full, {}}, 1));
  EXPECT_LT(full, sel);
  EXPECT_LT(sel, none);
}

}  // namespace
