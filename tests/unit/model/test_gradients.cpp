// Whole-model gradients against central finite differences (dropout on: masks
// are a pure function of the step, so the loss is a deterministic function of
// the parameters), and the loss of a fresh model against ln(vocab).
#include <gtest/gtest.h>

#include <cmath>

#include "model_test_util.h"

namespace {

using testing_support::TinyModel;

TEST(ModelGradients, MatchCentralFiniteDifferences) {
  model::GptConfig config = testing_support::tiny_config(0.1f);
  config.num_layers = 2;
  TinyModel model(config);
  const auto plan = recompute::RecomputePlan::uniform(model.config.num_layers, {});
  model.forward_backward(plan);
  std::vector<float> analytic(model.grads.flat.f32(),
                              model.grads.flat.f32() + model.grads.flat.numel());

  int checked = 0;
  double worst = 0;
  for (const model::NamedParam& p : model.params.named) {
    const int64_t n = p.tensor.numel();
    const int64_t base = p.tensor.f32() - model.params.flat.f32();
    for (int64_t k = 0; k < 3; ++k) {
      int64_t index = (k * 7919 + 13) % n;
      if (p.roles.vocab_padded) {
        index = index % (model.config.vocab_size * model.config.hidden_size);  // real rows only
      }
      float& w = p.tensor.f32()[index];
      const float saved = w;
      const float eps = 1e-2f;
      w = saved + eps;
      const double plus = model.forward_backward(plan);
      w = saved - eps;
      const double minus = model.forward_backward(plan);
      w = saved;
      const double numeric = (plus - minus) / (2.0 * eps);
      const double exact = analytic[static_cast<size_t>(base + index)];
      const double error =
          std::abs(numeric - exact) / std::max(1e-2, std::abs(numeric) + std::abs(exact));
      worst = std::max(worst, error);
      EXPECT_LT(error, 5e-2) << p.name << "[" << index << "]: numeric " << numeric << " analytic "
                             << exact;
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(model.params.named.size()) * 3);
  RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST(ModelGradients, PaddedVocabularyRowsGetNoGradient) {
  TinyModel model(testing_support::tiny_config());
  model.forward_backward(recompute::RecomputePlan::uniform(model.config.num_layers, {}));
  const int64_t C = model.config.hidden_size;
  const float* dwte = model.grads.wte.f32();
  double padded = 0, real = 0;
  for (int64_t i = model.config.vocab_size * C; i < model.config.padded_vocab() * C; ++i)
    padded += std::abs(dwte[i]);
  for (int64_t i = 0; i < model.config.vocab_size * C; ++i) real += std::abs(dwte[i]);
  EXPECT_EQ(padded, 0.0);
  EXPECT_GT(real, 0.0);
}

TEST(ModelLoss, FreshModelLossIsLogVocab) {
  model::GptConfig config = testing_support::tiny_config(0.f);
  config.vocab_size = 256;
  config.make_vocab_size_divisible_by = 128;
  TinyModel model(config, 4);
  const double loss =
      model.forward_backward(recompute::RecomputePlan::uniform(config.num_layers, {}));
  EXPECT_NEAR(loss, std::log(256.0), 0.05);
}

}  // namespace
