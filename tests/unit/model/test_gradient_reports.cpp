// What backward_step tells a GradientListener: progress after every piece of every backward;
// in the last backward only, each piece final in backward order (head, layers last to first,
// embedding), and at that moment the piece's gradients already hold their end-of-step values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model_test_util.h"

namespace {

using recompute::GradientPiece;

// Records reports and a copy of the reported piece's gradients at the time of the report.
class Recorder final : public recompute::GradientListener {
 public:
  explicit Recorder(const model::GptParams& grads) : grads_(grads) {}
  void progress() override { ++progress_calls; }
  void final(const GradientPiece& piece) override {
    std::vector<runtime::Tensor> tensors;
    switch (piece.kind) {
      case GradientPiece::Kind::head:
        order.push_back("head");
        tensors = {grads_.lnf_weight, grads_.lnf_bias};
        break;
      case GradientPiece::Kind::layer: {
        order.push_back("layer " + std::to_string(piece.param_layer));
        const model::LayerParams& l = grads_.layers[static_cast<size_t>(piece.param_layer)];
        tensors = {l.ln1_weight, l.qkv_weight, l.proj_weight, l.fc1_weight, l.fc2_bias};
        break;
      }
      case GradientPiece::Kind::embedding:
        order.push_back("embedding");
        tensors = {grads_.wpe, grads_.wte};
        break;
    }
    for (const runtime::Tensor& t : tensors) {
      snapshots.push_back({t, std::vector<float>(t.f32(), t.f32() + t.numel())});
    }
  }

  struct Snapshot {
    runtime::Tensor tensor;
    std::vector<float> values;
  };
  std::vector<std::string> order;
  std::vector<Snapshot> snapshots;
  int64_t progress_calls = 0;

 private:
  const model::GptParams& grads_;
};

void expect_reports(const recompute::RecomputePlan& plan, const char* name) {
  testing_support::TinyModel m(testing_support::tiny_config());
  recompute::ChunkExecutor chunk(m.config, m.params, m.grads, plan, m.micro_batch, m.allocator);
  Recorder recorder(m.grads);
  constexpr int kMicrobatches = 2;
  for (int mb = 0; mb < kMicrobatches; ++mb) chunk.forward_step(m.microbatch(), {1, 1});
  chunk.backward_step(m.loss_scale(), {}, {&recorder, /*last_backward=*/false});
  EXPECT_TRUE(recorder.order.empty()) << name << ": a piece reported final before the last";
  chunk.backward_step(m.loss_scale(), {}, {&recorder, /*last_backward=*/true});

  const int64_t L = m.config.num_layers;
  std::vector<std::string> expected = {"head"};
  for (int64_t layer = L - 1; layer >= 0; --layer)
    expected.push_back("layer " + std::to_string(layer));
  expected.push_back("embedding");
  EXPECT_EQ(recorder.order, expected) << name;
  EXPECT_EQ(recorder.progress_calls, kMicrobatches * (L + 2)) << name;
  for (const Recorder::Snapshot& s : recorder.snapshots) {
    const std::vector<float> now(s.tensor.f32(), s.tensor.f32() + s.tensor.numel());
    EXPECT_EQ(s.values, now) << name << ": gradients changed after their piece was final";
  }
}

TEST(GradientReports, FinalPiecesInBackwardOrderHoldTheirLastValues) {
  const int64_t L = testing_support::tiny_config().num_layers;
  expect_reports(recompute::RecomputePlan::uniform(L, {}), "none");
  expect_reports(recompute::RecomputePlan::uniform(L, {model::RecomputeMode::full, {}}, 2),
                 "full groups of 2");
}

}  // namespace
