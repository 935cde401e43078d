// Learning-rate schedule (Megatron semantics), AdamW decay groups and
// clip_grad_norm_ semantics over the flat gradient buffer.
#include <gtest/gtest.h>

#include <cmath>

#include "parallel/pipeline/grad_sync.h"
#include "trainer/engine/lr_schedule.h"
#include "trainer/engine/optimizer.h"

namespace trainer {
namespace {

OptimizerConfig schedule(DecayStyle style, int64_t warmup, int64_t decay) {
  OptimizerConfig o;
  o.lr = 1.0f;
  o.min_lr = 0.1f;
  o.lr_warmup_steps = warmup;
  o.lr_decay_steps = decay;
  o.lr_decay_style = style;
  return o;
}

TEST(LrSchedule, LinearWarmupFromZeroThenCosineToMin) {
  const OptimizerConfig o = schedule(DecayStyle::cosine, 10, 110);
  EXPECT_DOUBLE_EQ(learning_rate(o, 200, 1), 0.0);  // Megatron: step 1 uses 0 completed steps
  EXPECT_DOUBLE_EQ(learning_rate(o, 200, 6), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(o, 200, 11), 1.0);               // end of warmup: peak
  EXPECT_NEAR(learning_rate(o, 200, 61), 0.1 + 0.9 * 0.5, 1e-6);  // half way: cos(pi/2)
  EXPECT_NEAR(learning_rate(o, 200, 111), 0.1, 1e-6);
  EXPECT_DOUBLE_EQ(learning_rate(o, 200, 150), o.min_lr);  // past decay: min_lr
}

TEST(LrSchedule, LinearAndConstant) {
  EXPECT_NEAR(learning_rate(schedule(DecayStyle::linear, 0, 100), 100, 51), 0.1 + 0.9 * 0.5, 1e-6);
  EXPECT_DOUBLE_EQ(learning_rate(schedule(DecayStyle::constant, 4, 100), 100, 80), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(schedule(DecayStyle::constant, 4, 100), 100, 3), 0.5);
}

// WSD: the peak until the last lr_wsd_decay_steps of the decay, then each shape's coefficient
// of (max - min) half way through (r = 0.5) and min_lr at the end; values computed by hand.
TEST(LrSchedule, WsdHoldsThePeakThenDecaysInItsShape) {
  OptimizerConfig o = schedule(DecayStyle::wsd, 10, 110);
  o.lr_wsd_decay_steps = 40;  // the decay starts after 70 completed steps
  const std::pair<WsdDecayStyle, double> half_way[] = {
      {WsdDecayStyle::linear, 0.5},
      {WsdDecayStyle::cosine, 0.5},
      {WsdDecayStyle::exponential, 0.41421356237309515},  // 2 * 0.5^0.5 - 1
      {WsdDecayStyle::minus_sqrt, 0.29289321881345254}};  // 1 - 0.5^0.5
  for (const auto& [style, coefficient] : half_way) {
    o.lr_wsd_decay_style = style;
    EXPECT_DOUBLE_EQ(learning_rate(o, 200, 6), 0.5);   // warmup as before
    EXPECT_DOUBLE_EQ(learning_rate(o, 200, 41), 1.0);  // stable
    EXPECT_DOUBLE_EQ(learning_rate(o, 200, 71), 1.0);  // last step at the peak
    EXPECT_LT(learning_rate(o, 200, 72), 1.0);         // first step of the decay
    EXPECT_NEAR(learning_rate(o, 200, 91), 0.1 + 0.9 * coefficient, 1e-6);
    EXPECT_NEAR(learning_rate(o, 200, 111), 0.1, 1e-6);  // the decay's end: min_lr
    EXPECT_DOUBLE_EQ(learning_rate(o, 200, 150), o.min_lr);
  }
}

TEST(LrSchedule, InverseSquareRootFromThePeakFlooredAtMin) {
  const OptimizerConfig o = schedule(DecayStyle::inverse_square_root, 4, 1000);
  EXPECT_DOUBLE_EQ(learning_rate(o, 1000, 3), 0.5);          // warmup
  EXPECT_DOUBLE_EQ(learning_rate(o, 1000, 5), 1.0);          // end of warmup: peak
  EXPECT_DOUBLE_EQ(learning_rate(o, 1000, 17), 0.5);         // sqrt(4 / 16)
  EXPECT_DOUBLE_EQ(learning_rate(o, 1000, 65), 0.25);        // sqrt(4 / 64)
  EXPECT_DOUBLE_EQ(learning_rate(o, 1000, 901), o.min_lr);   // sqrt(4 / 900) < min_lr
  EXPECT_DOUBLE_EQ(learning_rate(o, 1000, 1002), o.min_lr);  // past decay
  const OptimizerConfig no_warmup = schedule(DecayStyle::inverse_square_root, 0, 1000);
  EXPECT_DOUBLE_EQ(learning_rate(no_warmup, 1000, 1), 1.0);  // max(n, 1)
  EXPECT_DOUBLE_EQ(learning_rate(no_warmup, 1000, 26), 0.2);
}

TEST(LrSchedule, DecayStepsDefaultToTrainSteps) {
  const OptimizerConfig o = schedule(DecayStyle::linear, 0, 0);
  EXPECT_NEAR(learning_rate(o, 40, 21), 0.1 + 0.9 * 0.5, 1e-6);
}

class OptimizerTest : public ::testing::Test {
 protected:
  OptimizerTest() {
    params_ = model::GptParams::allocate(allocator_, config_, runtime::MemoryCategory::param);
    grads_ = model::GptParams::allocate(allocator_, config_, runtime::MemoryCategory::grad);
    for (int64_t i = 0; i < params_.flat.numel(); ++i) {
      params_.flat.f32()[i] = 1.0f;
      grads_.flat.f32()[i] = 0.0f;
    }
  }
  model::GptConfig config_{.num_layers = 1,
                           .hidden_size = 8,
                           .num_attention_heads = 2,
                           .seq_length = 4,
                           .vocab_size = 16,
                           .make_vocab_size_divisible_by = 16};
  runtime::CpuAllocator allocator_;
  model::GptParams params_, grads_;
};

TEST_F(OptimizerTest, WeightDecayOnlyOnMatricesAndEmbeddings) {
  parallel::ProcessGroups groups = parallel::ProcessGroups::single();
  const parallel::GradBucketLayout layout =
      parallel::plan_grad_buckets({.numel = params_.flat.numel()});
  AdamW adamw(params_, params_, layout, allocator_, /*overlap=*/false);
  OptimizerConfig o;
  o.weight_decay = 0.5f;
  adamw.step(groups, grads_, o, /*lr=*/0.1, 1);  // zero gradients: only decay moves weights
  for (const model::NamedParam& p : params_.named) {
    const float expected = p.tensor.dim(0) > 0 && p.weight_decay ? 1.0f - 0.1f * 0.5f : 1.0f;
    EXPECT_FLOAT_EQ(p.tensor.f32()[0], expected) << p.name;
    EXPECT_EQ(p.weight_decay, p.tensor.shape().size() >= 2) << p.name;
  }
  EXPECT_EQ(allocator_.stats()[runtime::MemoryCategory::optimizer].current,
            2 * params_.flat.nbytes());
}

TEST_F(OptimizerTest, ClipByGlobalNormLikePyTorch) {
  parallel::ProcessGroups groups = parallel::ProcessGroups::single();  // the norm training uses
  auto global_norm = [&] {
    return parallel::global_grad_norm(groups, grads_, /*has_embedding_stage=*/true);
  };
  grads_.flat.f32()[0] = 3.0f;
  grads_.flat.f32()[grads_.flat.numel() - 1] = 4.0f;
  const double norm = global_norm();
  EXPECT_DOUBLE_EQ(norm, 5.0);
  EXPECT_EQ(clip_gradients(grads_, norm, 10.0), 1.0);  // under the limit: untouched
  EXPECT_FLOAT_EQ(grads_.flat.f32()[0], 3.0f);
  const double coeff = clip_gradients(grads_, norm, 1.0);
  EXPECT_NEAR(coeff, 1.0 / (5.0 + 1e-6), 1e-12);
  EXPECT_NEAR(global_norm(), 1.0, 1e-6);
}

}  // namespace
}  // namespace trainer
