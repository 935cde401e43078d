// The step-time model with known piece times: the schedule simulation gives the classic 1F1B
// and interleaved bubbles, the objective prices rebuilds by their pieces, and the time planner's
// plan is never predicted slower than a preset that fits the same budget.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trainer/engine/stage_setup.h"
#include "trainer/planning/auto_plan.h"
#include "trainer/planning/step_time.h"

namespace trainer {
namespace {

Config tiny(const std::vector<std::string>& extra) {
  std::vector<std::string> overrides = {
      "model.num_layers=8",          "model.hidden_size=64",
      "model.num_attention_heads=4", "model.seq_length=64",
      "model.vocab_size=128",        "train.micro_batch_size=2",
      "train.global_batch_size=16",  "optimizer.overlap_grad_reduce=false"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return parse_config("", "test", overrides, ConfigUse::plan);
}

// A profile at `config`'s stage-0 shapes: forward 1 ms, backward 2 ms, rebuilds as given,
// nothing else.
TimeProfile profile_for(const Config& config,
                        std::array<double, 4> modules = {0.5e-3, 0.1e-3, 0.05e-3, 0.3e-3}) {
  const StageSetup setup = make_stage_setup(config, 0, 0);
  TimeProfile p;
  p.device = "test";
  p.dtype = "f32";
  p.shapes = profile_shape_key(config, setup);
  p.gemm_gflops = 100;
  p.copy_gbps = 10;
  p.layer_forward_s = 1e-3;
  p.layer_backward_s = 2e-3;
  const char* names[] = {"selective{core_attn}", "selective{act}", "selective{layernorm}",
                         "selective{mlp}"};
  for (size_t m = 0; m < 4; ++m) p.rebuild.push_back({names[m], modules[m]});
  return p;
}

LinkBandwidths free_links() {
  return {1e12, 1e12, 1 << 20, 0, 0, "free"};
}

TEST(StepTime, OneProcessIsEveryMicrobatchOneAfterAnother) {
  const Config config = tiny({"recompute.granularity=none"});
  const CostModel costs({}, profile_for(config), "p.json");
  const StepPrediction p = predict_step_time(config, costs, free_links());
  // 8 microbatches x 8 layers x (1 + 2) ms.
  EXPECT_NEAR(p.step_s, 8 * 8 * 3e-3, 1e-9);
  EXPECT_NEAR(p.bubble_s, 0, 1e-12);
  EXPECT_NE(p.source.find("the profile p.json"), std::string::npos) << p.source;
}

TEST(StepTime, OneFOneBBubbleIsStagesLessOneTimesAMicrobatch) {
  const Config config = tiny({"parallel.pipeline=4", "recompute.granularity=none"});
  const CostModel costs({}, profile_for(config), "p.json");
  const StepPrediction p = predict_step_time(config, costs, free_links());
  const double op = 2 * 3e-3;  // two layers per stage, forward + backward
  EXPECT_NEAR(p.step_s, (8 + 4 - 1) * op, 1e-9);
  EXPECT_NEAR(p.bubble_s, 3 * op, 1e-9);
}

TEST(StepTime, InterleavingDividesTheBubbleByTheVirtualStages) {
  const Config config =
      tiny({"parallel.pipeline=4", "parallel.virtual_pipeline=2", "recompute.granularity=none"});
  const CostModel costs({}, profile_for(config), "p.json");
  const StepPrediction p = predict_step_time(config, costs, free_links());
  const double stage = 2 * 3e-3;  // per microbatch, both chunks
  EXPECT_NEAR(p.step_s, 8 * stage + 3 * stage / 2, 1e-9);
}

TEST(StepTime, RebuildsCostTheirPiecesOnceEach) {
  const Config none = tiny({"recompute.granularity=none"});
  const TimeProfile profile = profile_for(none);
  const CostModel costs({}, profile, "p.json");
  const RankTimes t = costs.times(none, make_stage_setup(none, 0, 0));
  auto entry = [](bool core_attn, bool act, bool layernorm, bool mlp) {
    return model::LayerRecompute{model::RecomputeMode::selective, {core_attn, act, layernorm, mlp}};
  };
  EXPECT_NEAR(t.rebuild_s(entry(true, false, false, false)), 0.5e-3, 1e-12);
  // mlp reruns fc1 and the activation; act adds nothing more.
  EXPECT_NEAR(t.rebuild_s(entry(false, true, false, true)), 0.3e-3, 1e-12);
  EXPECT_NEAR(t.rebuild_s(entry(true, true, true, true)), 0.5e-3 + 0.05e-3 + 0.3e-3, 1e-12);
  EXPECT_NEAR(t.rebuild_s({model::RecomputeMode::full, {}}), 1e-3, 1e-12);
  // Full recompute of every layer adds one forward per layer to each backward.
  Config full =
      tiny({"recompute.granularity=full", "recompute.method=uniform", "recompute.num_layers=1"});
  EXPECT_NEAR(predict_step_time(full, costs, free_links()).step_s, 8 * 8 * 4e-3, 1e-9);
}

// Note [Cold stash]: a layer pays the profile's cold-stash seconds in proportion to the share of
// none's stash its entry keeps (none all, full its input alone, a selective entry what it does
// not drop), and a rebuild's price is lowered by what the stash it drops would have cost,
// never below 0.
TEST(StepTime, ALayerPaysTheColdStashItKeeps) {
  const Config none = tiny({"recompute.granularity=none"});
  TimeProfile profile = profile_for(none);
  profile.stash_cold_forward_s = 0.2e-3;
  profile.stash_cold_backward_s = 0.4e-3;
  const CostModel costs({}, profile, "p.json");
  const StageSetup setup = make_stage_setup(none, 0, 0);
  const RankTimes t = costs.times(none, setup);
  const model::LayerRecompute core_attn{model::RecomputeMode::selective,
                                        {true, false, false, false}};
  const auto kept = [&](const model::LayerRecompute& entry) {
    return static_cast<double>(model::stash_kept_bytes(model::layer_stash_spec(setup.dims, entry)));
  };
  EXPECT_EQ(t.kept_share({}), 1.0);
  EXPECT_NEAR(t.kept_share(core_attn), kept(core_attn) / kept({}), 1e-12);
  EXPECT_LT(t.kept_share(core_attn), 0.9);  // the probabilities are most of this stash
  EXPECT_NEAR(t.kept_share({model::RecomputeMode::full, {}}),
              kept({model::RecomputeMode::full, {}}) / kept({}), 1e-12);
  EXPECT_LT(t.kept_share({model::RecomputeMode::full, {}}), 0.1);
  // Plan none: every layer of every microbatch pays all of it, forward and backward.
  EXPECT_NEAR(predict_step_time(none, costs, free_links()).step_s, 8 * 8 * (3e-3 + 0.6e-3), 1e-9);
  // core_attn's price: its 0.5 ms rerun less the 0.6 ms its dropped share would have cost cold.
  const RecomputePrices prices = time_prices(t, setup.dims, 0, 0);
  const double saved = (1 - t.kept_share(core_attn)) * 0.6e-3;
  EXPECT_NEAR(static_cast<double>(prices.selective(core_attn)) * 1e-9,
              std::max(0.5e-3 - saved, 0.0), 1e-9);
  const double full_saved = (1 - t.kept_share({model::RecomputeMode::full, {}})) * 0.6e-3;
  EXPECT_NEAR(static_cast<double>(prices.full_layer) * 1e-9, 1e-3 - full_saved, 1e-9);
  // A cold stash dearer than a rebuild makes the rebuild free, not paid for.
  profile.stash_cold_backward_s = 5e-3;
  const RankTimes dear = CostModel({}, profile, "p.json").times(none, setup);
  EXPECT_EQ(time_prices(dear, setup.dims, 0, 0).selective(core_attn), 0);
}

TEST(StepTime, ProfileOfOtherShapesFallsBackToTheRooflineAndSaysSo) {
  const Config config = tiny({});
  TimeProfile profile = profile_for(config);
  profile.shapes = "T1 B1";
  const CostModel costs({}, profile, "p.json");
  const StageSetup setup = make_stage_setup(config, 0, 0);
  EXPECT_FALSE(costs.times(config, setup).from_profile);
  EXPECT_NE(costs.source(config, setup).find("roofline"), std::string::npos);
  EXPECT_NE(costs.source(config, setup).find("not this run's"), std::string::npos);
}

// A profile prices attention as it was timed (Note [Timed documents]): one timed without the
// documents' mask does not price a run that masks them, nor the reverse.
TEST(StepTime, ProfilesPriceOnlyRunsWhoseDocumentsTheyTimed) {
  const Config plain = tiny({});
  const Config masked = tiny({"data.reset_attention_mask=true", "data.eod_id=101"});
  const StageSetup setup = make_stage_setup(plain, 0, 0);
  for (const Config* timed : {&plain, &masked}) {
    const CostModel costs({}, profile_for(*timed), "p.json");
    const bool documents = timed->data.reset_attention_mask;
    EXPECT_EQ(costs.matches(plain, setup), !documents);
    EXPECT_EQ(costs.matches(masked, setup), documents);
    EXPECT_EQ(costs.times(masked, setup).from_profile, documents);
    const Config& other = documents ? plain : masked;
    EXPECT_NE(costs.source(other, setup)
                  .find(documents ? "the profile timed attention with documents masked"
                                  : "the profile timed attention without the documents' mask"),
              std::string::npos)
        << costs.source(other, setup);
  }
  EXPECT_NE(profile_for(masked).shapes.find(" documents"), std::string::npos);
}

// A profile calibrated over real peers has the tensor-parallel collectives inside its layer
// times: the comm model adds them only to a replayed one's. Selective rebuilds stay
// profile-priced either way, and the data-parallel reduction is the comm model's in both.
TEST(StepTime, MeasuredCollectivesAreNotAddedTwice) {
  const Config config = tiny({"parallel.tensor=2", "parallel.sequence_parallel=true",
                              "parallel.data=2", "recompute.granularity=none"});
  const StageSetup setup = make_stage_setup(config, 0, 0);
  const LinkBandwidths links{10, 10, 8, 5e-6, 0, "test"};
  TimeProfile replayed = profile_for(config);
  TimeProfile measured = replayed;
  measured.ranks = 2;
  measured.collectives_measured = true;
  const CostModel replayed_costs({}, replayed, "p.json"), measured_costs({}, measured, "p.json");
  const CommTimes added = comm_times(config, setup, links, replayed_costs.times(config, setup));
  const CommTimes inside = comm_times(config, setup, links, measured_costs.times(config, setup));
  EXPECT_GT(added.layer_forward_s, 0);
  EXPECT_GT(added.rebuild_gather_s, 0);
  EXPECT_EQ(inside.layer_forward_s, 0);
  EXPECT_EQ(inside.layer_backward_s, 0);
  EXPECT_EQ(inside.rebuild_gather_s, 0);
  EXPECT_GT(inside.grad_reduce_s, 0);
  EXPECT_EQ(inside.grad_reduce_s, added.grad_reduce_s);
  // 4 microbatches (16 / 2 / 2) x 8 layers, each forward and backward, lose the collectives.
  const double gap = predict_step_time(config, replayed_costs, links).step_s -
                     predict_step_time(config, measured_costs, links).step_s;
  EXPECT_NEAR(gap, 4 * 8 * (added.layer_forward_s + added.layer_backward_s), 1e-9);
}

// On the CPU MPI's sums run on the computing cores, so an overlapped data-parallel reduction
// still adds its whole time; on CUDA it hides behind backward (here far longer than it).
TEST(StepTime, DataParallelReductionHidesBehindBackwardOnlyOnCuda) {
  const LinkBandwidths links{10, 10, 8, 5e-6, 0, "test"};
  for (const std::string device : {"cpu", "cuda"}) {
    const std::vector<std::string> layout = {"parallel.data=2", "recompute.granularity=none",
                                             "train.device=" + device};
    std::vector<std::string> overlap_on = layout, overlap_off = layout;
    overlap_on.push_back("optimizer.overlap_grad_reduce=true");
    overlap_off.push_back("optimizer.overlap_grad_reduce=false");
    const Config overlapped = tiny(overlap_on), serial = tiny(overlap_off);
    const CostModel costs({}, profile_for(overlapped), "p.json");
    const StageSetup setup = make_stage_setup(overlapped, 0, 0);
    const CommTimes comm = comm_times(overlapped, setup, links, costs.times(overlapped, setup));
    ASSERT_GT(comm.grad_reduce_s, 0);
    const StepPrediction hidden = predict_step_time(overlapped, costs, links);
    const StepPrediction exposed = predict_step_time(serial, costs, links);
    EXPECT_NEAR(exposed.stages[0].reduce_s, comm.grad_reduce_s + comm.embedding_sync_s, 1e-12);
    if (device == "cpu") {
      EXPECT_EQ(reduction_hides_behind_backward(overlapped), false);
      EXPECT_EQ(hidden.step_s, exposed.step_s);
    } else {
      EXPECT_EQ(reduction_hides_behind_backward(overlapped), true);
      EXPECT_NEAR(hidden.stages[0].reduce_s, comm.embedding_sync_s, 1e-12);
      EXPECT_LT(hidden.step_s, exposed.step_s);
    }
  }
}

// Sums within a node (the data-parallel all-reduce, the distributed optimizer's reduce-scatter)
// go at reduce_gbps where it is known; its all-gather of parameters stays at the link's; across
// nodes the inter link prices all of them.
TEST(StepTime, SumsWithinANodeGoAtTheReduceBandwidth) {
  const LinkBandwidths link_only{10, 10, 8, 0, 0, "test"};
  LinkBandwidths with_sums = link_only;
  with_sums.reduce_gbps = 2.5;  // a quarter of the link
  for (const bool distributed : {false, true}) {
    const Config config =
        tiny({"parallel.data=2", "recompute.granularity=none",
              distributed ? "optimizer.distributed=true" : "optimizer.distributed=false"});
    const CostModel costs({}, profile_for(config), "p.json");
    const StageSetup setup = make_stage_setup(config, 0, 0);
    const RankTimes times = costs.times(config, setup);
    const double plain = comm_times(config, setup, link_only, times).grad_reduce_s;
    const double summed = comm_times(config, setup, with_sums, times).grad_reduce_s;
    ASSERT_GT(plain, 0);
    // Non-distributed: one all-reduce, 4x slower. Distributed: the reduce-scatter of f32
    // gradients 4x slower, the all-gather of the (f32 here) parameters as before.
    EXPECT_NEAR(summed, distributed ? plain / 2 * 4 + plain / 2 : 4 * plain, 1e-12);
    LinkBandwidths across = with_sums;
    across.ranks_per_node = 1;  // the replicas on two nodes
    EXPECT_NEAR(comm_times(config, setup, across, times).grad_reduce_s, plain, 1e-12);
  }
  EXPECT_EQ(reduce_words(with_sums), "at 2.5 GB/s");
  EXPECT_EQ(parse_links("reduce=3", link_only).reduce_gbps, 3);
  EXPECT_THROW(parse_links("reduce=0", link_only), runtime::InputError);
}

// Under every budget from full recompute's total to none's, the time planner's plan is
// predicted no slower than any Megatron preset that fits, and no slower than the FLOPs
// planner's, on one process and on a 4-stage pipeline. With attention made expensive, the two
// objectives choose differently somewhere.
TEST(StepTime, TimePlannerIsNeverPredictedSlowerThanAFittingPreset) {
  for (const char* pipeline : {"parallel.pipeline=1", "parallel.pipeline=4"}) {
    const Config base = tiny({pipeline, "model.hidden_dropout=0.1", "model.attention_dropout=0.1"});
    const CostModel costs({}, profile_for(base, {4e-3, 0.1e-3, 0.05e-3, 0.3e-3}), "p.json");
    const std::vector<std::vector<std::string>> presets = {
        {"recompute.granularity=none"},
        {"recompute.granularity=selective"},
        {"recompute.granularity=selective", "recompute.modules=[core_attn,act,layernorm,mlp]"},
        {"recompute.granularity=full", "recompute.method=uniform", "recompute.num_layers=1"},
        {"recompute.granularity=full", "recompute.method=uniform", "recompute.num_layers=2"},
        {"recompute.granularity=full", "recompute.method=block", "recompute.num_layers=1"}};
    std::vector<std::pair<int64_t, double>> preset_points;  // (peak, step)
    for (const auto& preset : presets) {
      std::vector<std::string> o = {pipeline, "model.hidden_dropout=0.1",
                                    "model.attention_dropout=0.1"};
      o.insert(o.end(), preset.begin(), preset.end());
      const Config c = tiny(o);
      preset_points.emplace_back(summarize_plan(c).peak,
                                 predict_step_time(c, costs, free_links()).step_s);
    }
    const int64_t full = preset_points[3].first, none = preset_points[0].first;
    bool differ = false;
    for (int i = 0; i <= 4; ++i) {
      const int64_t budget = full + (none - full) * i / 4;
      Config by_time = base, by_flops = base;
      by_time.recompute = plan_under_budget(base, budget, {&costs, free_links()}).recompute;
      by_flops.recompute = plan_under_budget(base, budget, {}).recompute;
      const double t = predict_step_time(by_time, costs, free_links()).step_s;
      const double f = predict_step_time(by_flops, costs, free_links()).step_s;
      EXPECT_LE(summarize_plan(by_time).peak, budget);
      EXPECT_LE(t, f + 1e-12) << pipeline << ", budget " << budget;
      for (const auto& [peak, step] : preset_points)
        if (peak <= budget) {
          EXPECT_LE(t, step + 1e-12) << pipeline << ", budget " << budget;
        }
      differ = differ || t < f - 1e-9;
    }
    EXPECT_TRUE(differ) << pipeline << ": the objectives never chose differently";
  }
}

// with_auto_plan hands out each stage's proof (what a run logs); these small interleaved stages
// are proven the cheapest.
TEST(StepTime, AutoPlanHandsOutEachStagesProof) {
  const Config config =
      tiny({"parallel.pipeline=2", "parallel.virtual_pipeline=2", "recompute.auto=true",
            "train.memory_budget_gib=0.02", "train.plan_objective=flops"});
  std::vector<ChoiceProof> proofs;
  const Config planned = with_auto_plan(config, {}, &proofs);
  EXPECT_FALSE(planned.recompute.automatic);
  ASSERT_EQ(proofs.size(), 2u);
  for (const ChoiceProof proof : proofs) EXPECT_EQ(proof, ChoiceProof::cheapest);
}

}  // namespace
}  // namespace trainer
