// Every parallel layout against one process: losses of 3 steps and all the
// (gathered) gradients match within 1e-5 relative in fp32 with dropout on, and
// every rank's communication payload and activation peak per step equal the models' (with the
// distributed optimizer too);
// inside one layout every recompute plan gives bit-identical gradients; and a
// 4-stage 1F1B pipeline's measured activation peaks equal the memory model's. The flash
// layouts run flash attention against the one-process unfused run, the context-parallel ones
// ring attention.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "mpi_test_util.h"
#include "trainer/planning/auto_plan.h"
#include "trainer/planning/rank_memory.h"

namespace {

using mpi_test::all_ranks;
using mpi_test::world_rank;
using mpi_test::world_size;

using mpi_test::Layout;

constexpr const char* kFlash = "model.attention_backend=flash";

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {2, "tp2", {"parallel.tensor=2"}},
      {2, "tp2 sp", {"parallel.tensor=2", "parallel.sequence_parallel=true"}},
      {2, "pp2 1f1b", {"parallel.pipeline=2"}},
      {2, "pp2 interleaved", {"parallel.pipeline=2", "parallel.virtual_pipeline=2"}},
      {2, "dp2", {"parallel.data=2"}},
      {4, "tp2 pp2", {"parallel.tensor=2", "parallel.pipeline=2"}},
      {4, "pp4 1f1b", {"parallel.pipeline=4"}},
      {4,
       "dp2 tp2 sp",
       {"parallel.data=2", "parallel.tensor=2", "parallel.sequence_parallel=true"}},
      {8,
       "tp2 pp2 dp2 sp",
       {"parallel.tensor=2", "parallel.pipeline=2", "parallel.data=2",
        "parallel.sequence_parallel=true"}},
      {8,
       "tp2 pp2 dp2 interleaved",
       {"parallel.tensor=2", "parallel.pipeline=2", "parallel.data=2",
        "parallel.virtual_pipeline=2"}},
      // Flash attention (against the one-process unfused run): the same dropout masks.
      {2, "tp2 sp flash", {"parallel.tensor=2", "parallel.sequence_parallel=true", kFlash}},
      {2, "pp2 interleaved flash", {"parallel.pipeline=2", "parallel.virtual_pipeline=2", kFlash}},
      {2, "dp2 flash", {"parallel.data=2", kFlash}},
      {8,
       "tp2 pp2 dp2 sp flash",
       {"parallel.tensor=2", "parallel.pipeline=2", "parallel.data=2",
        "parallel.sequence_parallel=true", kFlash}},
      // Context parallelism: ring attention over the flash kernels, same masks again.
      {2, "cp2 flash", {"parallel.context=2", kFlash}},
      {4, "cp4 flash", {"parallel.context=4", kFlash}},
      {4,
       "tp2 cp2 sp flash",
       {"parallel.tensor=2", "parallel.context=2", "parallel.sequence_parallel=true", kFlash}},
      {4, "cp2 pp2 flash", {"parallel.context=2", "parallel.pipeline=2", kFlash}},
      {4, "cp2 dp2 flash", {"parallel.context=2", "parallel.data=2", kFlash}},
      {8,
       "tp2 cp2 dp2 sp flash",
       {"parallel.tensor=2", "parallel.context=2", "parallel.data=2",
        "parallel.sequence_parallel=true", kFlash}},
      {8,
       "cp2 pp2 dp2 interleaved flash",
       {"parallel.context=2", "parallel.pipeline=2", "parallel.data=2",
        "parallel.virtual_pipeline=2", kFlash}},
  };
  return all;
}

// Largest |a - b| / max |b| over the tensor's real elements.
double relative_difference(const model::NamedParam& a, const model::NamedParam& b,
                           int64_t elements) {
  double diff = 0, scale = 1e-12;
  for (int64_t i = 0; i < elements; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.tensor.f32()[i]) - b.tensor.f32()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.tensor.f32()[i])));
  }
  return diff / scale;
}

int64_t real_elements(const model::NamedParam& p, const model::GptConfig& config) {
  return p.roles.vocab_padded ? config.vocab_size * config.hidden_size : p.tensor.numel();
}

// The Llama block in a subset of the layouts (4 query heads sharing 2 key/value heads: under
// tp2 each rank holds one whole group), against a one-process Llama run.
const std::vector<std::string>& llama() {
  static const std::vector<std::string> base = {
      "model.architecture=llama", "model.num_query_groups=2", "model.ffn_hidden_size=48"};
  return base;
}

const std::vector<Layout>& llama_layouts() {
  static const std::vector<Layout> all = [] {
    std::vector<Layout> layouts = {
        {2, "llama tp2 sp", {"parallel.tensor=2", "parallel.sequence_parallel=true"}},
        {2, "llama pp2 interleaved", {"parallel.pipeline=2", "parallel.virtual_pipeline=2"}},
        {2, "llama cp2 flash", {"parallel.context=2", kFlash}},
        {2, "llama dp2 distributed", {"parallel.data=2", "optimizer.distributed=true"}},
        {4,
         "llama tp2 cp2 sp flash",
         {"parallel.tensor=2", "parallel.context=2", "parallel.sequence_parallel=true", kFlash}},
    };
    for (Layout& layout : layouts)
      layout.overrides.insert(layout.overrides.begin(), llama().begin(), llama().end());
    return layouts;
  }();
  return all;
}

// Every layout of `layouts` with this world size against one process of `base`: losses and
// step-1 gradients within 1e-5, every rank's payload and activation peak as predicted.
void match_one_process(const mpi_test::SharedData& shared, const std::vector<std::string>& base,
                       const std::vector<Layout>& layouts) {
  constexpr int kSteps = 3;
  const trainer::Config reference_config = mpi_test::config_for(shared, base);
  std::vector<double> reference_loss;
  std::vector<std::vector<float>> reference_grads;  // flat, per step
  std::unique_ptr<mpi_test::Run> reference;
  if (world_rank() == 0) {
    reference = std::make_unique<mpi_test::Run>(reference_config, false);
    for (int s = 0; s < kSteps; ++s) {
      reference_loss.push_back(reference->trainer->train_step().loss);
      const auto& g = reference->trainer->grads().flat;
      reference_grads.emplace_back(g.f32(), g.f32() + g.numel());
    }
  }
  for (const Layout& layout : layouts) {
    if (layout.ranks != world_size()) continue;
    const trainer::Config config = mpi_test::config_for(shared, layout.overrides);
    mpi_test::Run run(config, true);
    // A distributed optimizer's ranks each hold only their reduced shard of the gradients: the
    // losses after its updates carry the comparison.
    const bool whole_grads = !config.optimizer.distributed;
    double worst_loss = 0, worst_grad = 0, later_grad = 0;
    std::string worst_tensor;
    for (int s = 0; s < kSteps; ++s) {
      const trainer::StepMetrics metrics = run.trainer->train_step();
      const double loss = metrics.loss;
      EXPECT_TRUE(all_ranks(metrics.comm_bytes == metrics.predicted_comm_bytes))
          << layout.name << ": rank " << world_rank() << " handed " << metrics.comm_bytes
          << " bytes to its communicators, the model predicts " << metrics.predicted_comm_bytes;
      EXPECT_TRUE(all_ranks(metrics.memory[runtime::MemoryCategory::activation].peak ==
                            metrics.predicted_activation_peak))
          << layout.name << ": rank " << world_rank() << " activation peak "
          << metrics.memory[runtime::MemoryCategory::activation].peak << ", predicted "
          << metrics.predicted_activation_peak;
      const auto full = run.trainer->gather(run.trainer->grads());
      if (world_rank() != 0) continue;
      worst_loss = std::max(worst_loss, std::abs(loss - reference_loss[s]) / reference_loss[s]);
      if (!whole_grads) continue;
      // The reference's gradients of this step, viewed by name.
      std::vector<float> saved(reference_grads[s]);
      const model::GptParams& ref = reference->trainer->grads();
      std::memcpy(ref.flat.f32(), saved.data(), saved.size() * sizeof(float));
      for (const model::NamedParam& p : full->named) {
        const model::NamedParam* r = ref.find(p.name);
        ASSERT_NE(r, nullptr) << p.name;
        const double d = relative_difference(p, *r, real_elements(p, reference_config.model));
        if (s > 0) {
          later_grad = std::max(later_grad, d);  // after updates: rounding grows through Adam
        } else if (d > worst_grad) {
          worst_grad = d, worst_tensor = p.name;
        }
      }
    }
    if (world_rank() == 0) {
      std::printf(
          "[ layout ] %-24s loss (3 steps) %.1e, step-1 gradients %.1e (%s), "
          "steps 2-3 gradients %.1e\n",
          layout.name, worst_loss, worst_grad, worst_tensor.c_str(), later_grad);
      EXPECT_LT(worst_loss, 1e-5) << layout.name;
      EXPECT_LT(worst_grad, 1e-5) << layout.name << ": " << worst_tensor;
    }
  }
}

TEST(Layouts, MatchOneProcessWithin1e5) {
  mpi_test::SharedData shared;
  match_one_process(shared, {}, layouts());
}

TEST(Layouts, LlamaMatchesOneProcessWithin1e5) {
  mpi_test::SharedData shared;
  match_one_process(shared, llama(), llama_layouts());
}

// Qwen2's q, k and v biases (model.add_qkv_bias) split with their kv groups under tp2.
TEST(Layouts, Qwen2BiasesMatchOneProcessWithin1e5) {
  mpi_test::SharedData shared;
  std::vector<std::string> qwen2 = llama();
  qwen2.push_back("model.add_qkv_bias=true");
  std::vector<std::string> tp2 = qwen2;
  tp2.insert(tp2.end(), {"parallel.tensor=2", "parallel.sequence_parallel=true"});
  match_one_process(shared, qwen2, {{2, "qwen2 tp2 sp", tp2}});
}

// Heads wider than hidden_size / heads (model.kv_channels 12: 4 heads, 48 wide, in a 32-wide
// model, as Mistral NeMo's and Qwen3's) under tp2 sp, and tp2 cp2 with flash.
TEST(Layouts, WideHeadsMatchOneProcessWithin1e5) {
  mpi_test::SharedData shared;
  std::vector<std::string> wide = llama();
  wide.push_back("model.kv_channels=12");
  std::vector<std::string> tp2 = wide, tp2cp2 = wide;
  tp2.insert(tp2.end(), {"parallel.tensor=2", "parallel.sequence_parallel=true"});
  tp2cp2.insert(tp2cp2.end(), {"parallel.tensor=2", "parallel.context=2",
                               "parallel.sequence_parallel=true", kFlash});
  match_one_process(shared, wide,
                    {{2, "wide heads tp2 sp", tp2}, {4, "wide heads tp2 cp2 sp flash", tp2cp2}});
}

// Qwen3's q and k norms (model.qk_layernorm), with YaRN's RoPE scaling as its long-context
// setting: each tensor-parallel rank's gradient of the norms' weights covers its own heads,
// summed over tp with or without sequence parallelism, and the context ring scales the scores
// as one process does; tp2, and tp2 cp2 sp with flash.
TEST(Layouts, Qwen3NormsMatchOneProcessWithin1e5) {
  mpi_test::SharedData shared;
  std::vector<std::string> qwen3 = llama();
  qwen3.insert(qwen3.end(), {"model.qk_layernorm=true", "model.kv_channels=12",
                             "model.rope_scaling.type=yarn", "model.rope_scaling.factor=4",
                             "model.rope_scaling.original_max_position_embeddings=4096"});
  std::vector<std::string> tp2 = qwen3, tp2cp2 = qwen3;
  tp2.push_back("parallel.tensor=2");
  tp2cp2.insert(tp2cp2.end(), {"parallel.tensor=2", "parallel.context=2",
                               "parallel.sequence_parallel=true", kFlash});
  match_one_process(shared, qwen3, {{2, "qwen3 tp2", tp2}, {4, "qwen3 tp2 cp2 sp flash", tp2cp2}});
}

// A sliding window of 6 positions (model.sliding_window) against one process's unfused
// attention: the tp2 sp unfused softmax, and the context ring with flash blocks, where the
// window leaves some pairs of chunks no visible key (cp2: chunks of 4 positions, cp4: of 2) and
// some pairs one key only (query 8 sees key 3 under cp2, query 6 key 1 under cp4).
TEST(Layouts, SlidingWindowMatchesOneProcessWithin1e5) {
  mpi_test::SharedData shared;
  std::vector<std::string> window = llama();
  window.push_back("model.sliding_window=6");
  std::vector<Layout> layouts = {
      {2, "window tp2 sp", {"parallel.tensor=2", "parallel.sequence_parallel=true"}},
      {2, "window cp2 flash", {"parallel.context=2", kFlash}},
      {4, "window cp4 flash", {"parallel.context=4", kFlash}},
  };
  for (Layout& layout : layouts)
    layout.overrides.insert(layout.overrides.begin(), window.begin(), window.end());
  match_one_process(shared, window, layouts);
}

// Megatron's --eod-mask-loss (data.eod_mask_loss; 'e', id 101, stands for the end-of-document
// token in the synthetic text): the loss is the mean over the global batch's counted targets in
// every layout, under the vocab-parallel loss (tp2 sp), dp2 with the distributed optimizer, cp2
// (each rank holds two chunks of every sample) with tp2 and flash, and pp2 x dp2.
TEST(Layouts, EodMaskLossMatchesOneProcessWithin1e5) {
  mpi_test::SharedData shared;
  const std::vector<std::string> masked = {"data.eod_mask_loss=true", "data.eod_id=101"};
  std::vector<Layout> layouts = {
      {2, "eod mask tp2 sp", {"parallel.tensor=2", "parallel.sequence_parallel=true"}},
      {2, "eod mask dp2 distributed", {"parallel.data=2", "optimizer.distributed=true"}},
      {4,
       "eod mask tp2 cp2 sp flash",
       {"parallel.tensor=2", "parallel.context=2", "parallel.sequence_parallel=true", kFlash}},
      {4, "eod mask pp2 dp2", {"parallel.pipeline=2", "parallel.data=2"}},
  };
  for (Layout& layout : layouts)
    layout.overrides.insert(layout.overrides.begin(), masked.begin(), masked.end());
  match_one_process(shared, masked, layouts);
}

// Megatron's --reset-attention-mask (data.reset_attention_mask; 'e', id 101, ends the documents
// of the synthetic text) against one process's unfused attention: the tp2 sp unfused softmax,
// the context ring with flash blocks (cp2, and cp4 where every chunk is 2 positions, so many
// chunk pairs hold no key a query's document sees), pp4, whose middle stages hold the starts
// without tokens or targets, and pp2 interleaved, whose every model chunk holds its own.
TEST(Layouts, DocumentMaskMatchesOneProcessWithin1e5) {
  mpi_test::SharedData shared;
  std::vector<std::string> documents = llama();
  documents.insert(documents.end(), {"data.reset_attention_mask=true", "data.eod_id=101"});
  std::vector<Layout> layouts = {
      {2, "documents tp2 sp", {"parallel.tensor=2", "parallel.sequence_parallel=true"}},
      {2, "documents cp2 flash", {"parallel.context=2", kFlash}},
      {4, "documents cp4 flash", {"parallel.context=4", kFlash}},
      {4, "documents pp4", {"parallel.pipeline=4"}},
      {2, "documents pp2 interleaved", {"parallel.pipeline=2", "parallel.virtual_pipeline=2"}},
  };
  for (Layout& layout : layouts)
    layout.overrides.insert(layout.overrides.begin(), documents.begin(), documents.end());
  match_one_process(shared, documents, layouts);
}

// Megatron's --reset-position-ids (data.reset_position_ids; 'e' ends the documents) against one
// process: GPT-2's learned positions under tp2 sp (each rank embeds its own rows) and cp2 (the
// ranks' rows add into the same positions of wpe's gradient), then Llama's rotary positions,
// without the mask, under cp2 and pp2.
TEST(Layouts, DocumentPositionsMatchOneProcessWithin1e5) {
  mpi_test::SharedData shared;
  const std::vector<std::string> positions = {"data.reset_position_ids=true", "data.eod_id=101"};
  std::vector<std::string> rotary = llama();
  rotary.insert(rotary.end(), positions.begin(), positions.end());
  for (const auto& [model, layouts] :
       {std::pair{
            positions,
            std::vector<Layout>{
                {2, "positions tp2 sp", {"parallel.tensor=2", "parallel.sequence_parallel=true"}},
                {2, "positions cp2 flash", {"parallel.context=2", kFlash}}}},
        std::pair{rotary, std::vector<Layout>{
                              {2, "rotary positions cp2 flash", {"parallel.context=2", kFlash}},
                              {2, "rotary positions pp2", {"parallel.pipeline=2"}}}}}) {
    std::vector<Layout> with_model = layouts;
    for (Layout& layout : with_model)
      layout.overrides.insert(layout.overrides.begin(), model.begin(), model.end());
    match_one_process(shared, model, with_model);
  }
}

// A 0.25 / 0.75 blend of two corpora, each shuffled in its own order (Megatron's flat list).
std::vector<std::string> blend(const mpi_test::SharedData& shared) {
  return {"data.blend=[0.25, " + shared.data() + ", 0.75, " + shared.code() + "]",
          "data.shuffle=true", "train.eval_iters=2"};
}

// A blend reads the same samples in every layout: 3 steps' losses, the step-1 gradients and each
// dataset's validation loss match one process within 1e-5 under dp2 and pp2 (2 ranks), dp2 x pp2
// (4) and tp2 x pp2 x dp2 (8).
TEST(Layouts, BlendMatchesOneProcess) {
  mpi_test::SharedData shared;
  std::vector<Layout> blended = {
      {2, "blend dp2", {"parallel.data=2"}},
      {2, "blend pp2", {"parallel.pipeline=2"}},
      {4, "blend dp2 pp2", {"parallel.data=2", "parallel.pipeline=2"}},
      {8, "blend tp2 pp2 dp2", {"parallel.tensor=2", "parallel.pipeline=2", "parallel.data=2"}},
  };
  const std::vector<std::string> base = blend(shared);
  for (Layout& layout : blended)
    layout.overrides.insert(layout.overrides.begin(), base.begin(), base.end());
  match_one_process(shared, base, blended);
  // Validation, dataset by dataset.
  std::vector<double> reference;
  if (world_rank() == 0) {
    mpi_test::Run single(mpi_test::config_for(shared, base), false);
    reference = single.trainer->evaluate_datasets().per_dataset;
  }
  for (const Layout& layout : blended) {
    if (layout.ranks != world_size()) continue;
    mpi_test::Run run(mpi_test::config_for(shared, layout.overrides), true);
    const std::vector<double> losses = run.trainer->evaluate_datasets().per_dataset;
    if (world_rank() != 0) continue;
    ASSERT_EQ(losses.size(), 2u);
    for (size_t k = 0; k < 2; ++k)
      EXPECT_LT(std::abs(losses[k] - reference[k]) / reference[k], 1e-5)
          << layout.name << ", dataset " << k << ": " << losses[k] << " vs " << reference[k];
  }
}

// Every memory category's measured peak on this rank against the whole-rank model's.
void expect_every_category_predicted(const trainer::Config& config,
                                     const trainer::StepMetrics& metrics, const std::string& what) {
  const trainer::RankMemory predicted = trainer::predict_rank_memory(config, world_rank());
  for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories) {
    EXPECT_TRUE(all_ranks(metrics.memory[c].peak == predicted[c]))
        << what << ": rank " << world_rank() << " " << runtime::category_name(c) << " peak "
        << metrics.memory[c].peak << ", predicted " << predicted[c];
  }
}

// Every plan gives the same gradients, and every rank's every memory category is predicted.
void every_plan_bit_identical(const std::vector<Layout>& layouts) {
  mpi_test::SharedData shared;
  const std::vector<std::vector<std::string>> plans = {
      {"recompute.granularity=none"},
      {"recompute.granularity=full", "recompute.method=uniform", "recompute.num_layers=1"},
      {"recompute.granularity=full", "recompute.method=block", "recompute.num_layers=1"},
      {"recompute.granularity=selective", "recompute.modules=[core_attn, act, layernorm, mlp]"},
      {"recompute.granularity=selective", "recompute.modules=[core_attn]"},
  };
  for (const Layout& layout : layouts) {
    if (layout.ranks != world_size()) continue;
    std::vector<float> reference;
    for (const auto& plan : plans) {
      std::vector<std::string> overrides = layout.overrides;
      overrides.insert(overrides.end(), plan.begin(), plan.end());
      const trainer::Config config = mpi_test::config_for(shared, overrides);
      mpi_test::Run run(config, true);
      const trainer::StepMetrics metrics = run.trainer->train_step();
      expect_every_category_predicted(config, metrics, layout.name);
      const auto full = run.trainer->gather(run.trainer->grads());
      if (world_rank() != 0) continue;
      const std::vector<float> grads(full->flat.f32(), full->flat.f32() + full->flat.numel());
      if (reference.empty()) {
        reference = grads;
      } else {
        EXPECT_TRUE(grads == reference) << layout.name << ", plan " << plan.back();
      }
    }
  }
}

TEST(Layouts, EveryRecomputePlanGivesBitIdenticalGradients) {
  every_plan_bit_identical(layouts());
}

// With documents (data.reset_attention_mask) every stage holds each microbatch's starts through
// its backward: on pp2 and pp4 (middle stages), and cp2 with flash, every plan gives the same
// gradients and every category is predicted; and on cp2 with the positions restarting too
// (data.reset_position_ids), whose position embedding reads the same starts.
TEST(Layouts, DocumentsEveryRecomputePlanGivesBitIdenticalGradients) {
  const std::vector<std::string> documents = {"data.reset_attention_mask=true", "data.eod_id=101"};
  std::vector<Layout> layouts = {
      {2, "documents pp2", {"parallel.pipeline=2"}},
      {2, "documents cp2 flash", {"parallel.context=2", kFlash}},
      {2,
       "documents and positions cp2 flash",
       {"parallel.context=2", kFlash, "data.reset_position_ids=true"}},
      {4, "documents pp4", {"parallel.pipeline=4"}},
  };
  for (Layout& layout : layouts)
    layout.overrides.insert(layout.overrides.begin(), documents.begin(), documents.end());
  every_plan_bit_identical(layouts);
}

TEST(Layouts, LlamaEveryRecomputePlanGivesBitIdenticalGradients) {
  every_plan_bit_identical(llama_layouts());
}

// bf16 on the emulated device (tests/support/emulated_device.h: f32 arithmetic per op, bf16
// storage) in every layout: activations travel as bf16 (MPI sums them through its bf16
// operation), the payload model counts them so, and the losses stay within bf16 rounding of
// the one-process bf16 run (partial sums round at other places, so not bit for bit).
TEST(Layouts, Bf16OnTheEmulatedDeviceMatchesOneProcess) {
  mpi_test::SharedData shared;
  const emulated::Device registered;
  const std::vector<std::string> bf16 = {"train.device=cuda", "train.precision=bf16"};
  std::vector<double> reference;
  if (world_rank() == 0) {
    mpi_test::Run single(mpi_test::config_for(shared, bf16), false, true);
    for (int s = 0; s < 3; ++s) reference.push_back(single.trainer->train_step().loss);
  }
  for (const Layout& layout : layouts()) {
    if (layout.ranks != world_size()) continue;
    std::vector<std::string> overrides = layout.overrides;
    overrides.insert(overrides.end(), bf16.begin(), bf16.end());
    const trainer::Config config = mpi_test::config_for(shared, overrides);
    mpi_test::Run run(config, true, true);
    double worst = 0;
    for (int s = 0; s < 3; ++s) {
      const trainer::StepMetrics m = run.trainer->train_step();
      expect_every_category_predicted(config, m, layout.name);
      EXPECT_TRUE(all_ranks(m.comm_bytes == m.predicted_comm_bytes))
          << layout.name << ": rank " << world_rank() << " " << m.comm_bytes << " vs "
          << m.predicted_comm_bytes;
      EXPECT_TRUE(all_ranks(m.memory[runtime::MemoryCategory::activation].peak ==
                            m.predicted_activation_peak))
          << layout.name;
      if (world_rank() == 0)
        worst = std::max(worst, std::abs(m.loss - reference[s]) / reference[s]);
    }
    if (world_rank() == 0) {
      std::printf("[ bf16   ] %-24s loss (3 steps) within %.1e of one process\n", layout.name,
                  worst);
      EXPECT_LT(worst, 1e-2) << layout.name;
    }
  }
}

// A device communicator over emulated device memory: the group's MPI communicator behind the
// device-buffer interface (where NCCL would sit), counting its calls and opening device
// memory while MPI reads or writes it (until a send is waited for). The MPI communicator
// counts the payload (the split adds both sides).
class HostMemoryDeviceCommunicator final : public parallel::Communicator {
 public:
  HostMemoryDeviceCommunicator(parallel::Communicator& inner, int64_t& calls)
      : inner_(inner), calls_(calls) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  bool takes_device_buffers() const override { return true; }

 private:
  void do_all_reduce_sum_buffer(void* data, int64_t count, runtime::DType dtype) override {
    const emulated::Access open = enter();
    inner_.all_reduce_sum(data, count, dtype);
  }
  void do_all_reduce_sum_f64_buffer(double* data, int64_t count) override {
    const emulated::Access open = enter();
    inner_.all_reduce_sum(data, count);
  }
  void do_all_reduce_max_buffer(float* data, int64_t count) override {
    const emulated::Access open = enter();
    inner_.all_reduce_max(data, count);
  }
  void do_all_gather_buffer(void* out, const void* in, int64_t count,
                            runtime::DType dtype) override {
    const emulated::Access open = enter();
    inner_.all_gather(out, in, count, dtype);
  }
  void do_reduce_scatter_buffer(void* out, const void* in, int64_t count,
                                runtime::DType dtype) override {
    const emulated::Access open = enter();
    inner_.reduce_scatter(out, in, count, dtype);
  }
  void do_broadcast(void* data, int64_t bytes, int root) override {
    inner_.broadcast(data, bytes, root);
  }
  void do_barrier() override { inner_.barrier(); }
  std::unique_ptr<parallel::Request> do_send_async_buffer(const void* data, int64_t bytes, int peer,
                                                          int tag) override {
    ++calls_;
    auto open = std::make_unique<emulated::Access>();
    return std::make_unique<OpenUntilWaited>(inner_.send_async(data, bytes, peer, tag),
                                             std::move(open));
  }
  void do_recv_buffer(void* data, int64_t bytes, int peer, int tag) override {
    const emulated::Access open = enter();
    inner_.recv(data, bytes, peer, tag);
  }
  // The inner communicator's non-blocking collectives, as NCCL's would be: the blocking ones
  // may sum in another order on more than two ranks.
  std::unique_ptr<parallel::Request> do_reduce_scatter_async_buffer(void* out, const void* in,
                                                                    int64_t count,
                                                                    runtime::DType dtype) override {
    ++calls_;
    auto open = std::make_unique<emulated::Access>();
    return std::make_unique<OpenUntilWaited>(inner_.reduce_scatter_async(out, in, count, dtype),
                                             std::move(open));
  }
  std::unique_ptr<parallel::Request> do_all_gather_async_buffer(void* out, const void* in,
                                                                int64_t count,
                                                                runtime::DType dtype) override {
    ++calls_;
    auto open = std::make_unique<emulated::Access>();
    return std::make_unique<OpenUntilWaited>(inner_.all_gather_async(out, in, count, dtype),
                                             std::move(open));
  }

  // A send or collective whose buffers stay open until it completed.
  class OpenUntilWaited final : public parallel::Request {
   public:
    OpenUntilWaited(std::unique_ptr<parallel::Request> inner,
                    std::unique_ptr<emulated::Access> open)
        : inner_(std::move(inner)), open_(std::move(open)) {}
    ~OpenUntilWaited() override { inner_.reset(); }  // waits while still open
    void wait() override { inner_->wait(); }

   private:
    std::unique_ptr<parallel::Request> inner_;
    std::unique_ptr<emulated::Access> open_;
  };
  emulated::Access enter() {
    ++calls_;
    return emulated::Access();
  }
  parallel::Communicator& inner_;
  int64_t& calls_;
};

// The device path of every layout on an emulated device, two ways: MPI alone (every
// activation, gradient and p2p message staged through host memory), and with a device
// communicator where NCCL sits (add_device_communicators: device tensors go to it as they
// are, host buffers to MPI). Losses and gathered gradients equal the host run of the same
// layout bit for bit, and the payload model holds.
TEST(Layouts, EmulatedDeviceMatchesTheHostRunBitForBit) {
  mpi_test::SharedData shared;
  enum Path { host, staged, device_communicators };
  for (const Layout& layout : layouts()) {
    if (layout.ranks != world_size()) continue;
    std::vector<double> losses[3];
    std::vector<float> grads[3];
    int64_t device_calls = 0;
    for (Path path : {host, staged, device_communicators}) {
      std::optional<emulated::Device> registered;
      if (path != host) registered.emplace();
      auto add_device_communicators = [&](parallel::ProcessGroups& groups) {
        parallel::add_device_communicators(groups, [&](parallel::Communicator& inner, bool) {
          return std::make_unique<HostMemoryDeviceCommunicator>(inner, device_calls);
        });
      };
      mpi_test::Run run(
          mpi_test::config_for(shared, layout.overrides), true, path != host,
          path == device_communicators ? add_device_communicators : mpi_test::GroupsSetup());
      for (int s = 0; s < 2; ++s) {
        const trainer::StepMetrics m = run.trainer->train_step();
        losses[path].push_back(m.loss);
        EXPECT_TRUE(all_ranks(m.comm_bytes == m.predicted_comm_bytes))
            << layout.name << ", path " << path << ": rank " << world_rank() << " " << m.comm_bytes
            << " vs " << m.predicted_comm_bytes;
      }
      const auto full = run.trainer->gather(run.trainer->grads());
      if (world_rank() == 0)
        grads[path].assign(full->flat.f32(), full->flat.f32() + full->flat.numel());
    }
    EXPECT_EQ(losses[staged], losses[host]) << layout.name;
    EXPECT_EQ(losses[device_communicators], losses[host]) << layout.name;
    EXPECT_TRUE(all_ranks(device_calls > 0)) << layout.name << ": no device tensor reached them";
    if (world_rank() == 0) {
      EXPECT_TRUE(grads[staged] == grads[host]) << layout.name;
      EXPECT_TRUE(grads[device_communicators] == grads[host]) << layout.name;
    }
  }
}

// The distributed optimizer in every layout, in ~8 KiB buckets (several, and a staged tail where
// the buffer does not divide by dp): every rank's payload, reduce-scatters and all-gathers
// included, equals the model's, and every memory category the whole-rank model's.
TEST(Layouts, DistributedOptimizerPayloadEqualsTheModel) {
  mpi_test::SharedData shared;
  for (const Layout& layout : layouts()) {
    if (layout.ranks != world_size()) continue;
    std::vector<std::string> overrides = layout.overrides;
    overrides.insert(overrides.end(), {"optimizer.distributed=true", "optimizer.bucket_mb=0.008"});
    const trainer::Config config = mpi_test::config_for(shared, overrides);
    mpi_test::Run run(config, true);
    for (int s = 0; s < 2; ++s) {
      const trainer::StepMetrics m = run.trainer->train_step();
      expect_every_category_predicted(config, m, layout.name);
      EXPECT_TRUE(all_ranks(m.comm_bytes == m.predicted_comm_bytes))
          << layout.name << ": rank " << world_rank() << " " << m.comm_bytes << " vs "
          << m.predicted_comm_bytes;
    }
  }
}

TEST(Layouts, PipelineStagesHoldTheirMicrobatchesAsPredicted) {
  if (world_size() != 4) GTEST_SKIP() << "a 4-stage pipeline";
  mpi_test::SharedData shared;
  mpi_test::Run run(
      mpi_test::config_for(shared, {"parallel.pipeline=4", "train.global_batch_size=16"}),
      true);  // 8 microbatches: stage r holds min(4 - r, 8) at once
  const trainer::StepMetrics m = run.trainer->train_step();
  const int64_t measured = m.memory[runtime::MemoryCategory::activation].peak;
  EXPECT_EQ(measured, m.predicted_activation_peak) << "stage " << world_rank();
  // Stage 0 holds 4 microbatches and the embedding; stage 3 one and the head.
  double peaks[4] = {};
  peaks[world_rank()] = static_cast<double>(measured);
  MPI_Allreduce(MPI_IN_PLACE, peaks, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GT(peaks[0], peaks[1]);
  EXPECT_GT(peaks[1], peaks[2]);
  EXPECT_TRUE(all_ranks(measured == m.predicted_activation_peak));
}

}  // namespace

namespace {

// A checkpoint of this world's layout resumes bit for bit, and one process of `base` loads it.
void resume_and_reshard(const mpi_test::SharedData& shared, const std::vector<std::string>& base) {
  // 2 ranks: data-parallel replicas (only dp rank 0 writes); 4: tensor 2 x pipeline 2.
  std::vector<std::string> layout = base;
  layout.push_back("checkpoint.dir=" + shared.out("ckpt"));
  if (world_size() == 2) layout.push_back("parallel.data=2");
  if (world_size() == 4) layout.insert(layout.end(), {"parallel.tensor=2", "parallel.pipeline=2"});
  double continued = 0;
  {
    mpi_test::Run run(mpi_test::config_for(shared, layout), true);
    run.trainer->train_step();
    run.trainer->train_step();
    run.trainer->save_checkpoint();
    continued = run.trainer->train_step().loss;
  }
  // The same layout resumes bit for bit.
  {
    mpi_test::Run run(mpi_test::config_for(shared, layout), true);
    EXPECT_TRUE(run.trainer->resume("auto"));
    EXPECT_EQ(run.trainer->step(), 2);
    EXPECT_EQ(run.trainer->train_step().loss, continued);
  }
  // One process loads the tp2 x pp2 shards (vocabulary padded differently).
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::vector<std::string> one = base;
    one.push_back("checkpoint.dir=" + shared.out("ckpt"));
    mpi_test::Run single(mpi_test::config_for(shared, one), false);
    EXPECT_TRUE(single.trainer->resume("auto"));
    const double loss = single.trainer->train_step().loss;
    EXPECT_LT(std::abs(loss - continued) / continued, 1e-5) << loss << " vs " << continued;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Layouts, CheckpointResumesBitExactAndReshardsToOneProcess) {
  if (world_size() == 8) GTEST_SKIP() << "covered by 2 (data) and 4 (tensor x pipeline) ranks";
  mpi_test::SharedData shared;
  resume_and_reshard(shared, {});
}

// A blend resumes bit for bit under dp2 and tp2 x pp2 and continues in one process.
TEST(Layouts, BlendCheckpointResumesBitExactAndReshardsToOneProcess) {
  if (world_size() == 8) GTEST_SKIP() << "covered by 2 (data) and 4 (tensor x pipeline) ranks";
  mpi_test::SharedData shared;
  resume_and_reshard(shared, blend(shared));
}

// Llama's shards (whole kv groups of the fused QKV, each rank's gate and up rows, the untied
// output layer) reshard from tensor 2 x pipeline 2 to one process.
TEST(Layouts, LlamaCheckpointReshardsFromTp2Pp2ToOneProcess) {
  if (world_size() != 4) GTEST_SKIP() << "a tp2 x pp2 layout on 4 ranks";
  mpi_test::SharedData shared;
  resume_and_reshard(shared, llama());
}

// Llama checkpoints reshard both ways between one process and tensor parallelism 2 (kv groups,
// gate and up rows, the output layer and the vocabulary padding all split differently): one
// process writes step 2, tp2 resumes it and writes step 3, one process resumes that. Each
// continues the loss curve of one uninterrupted process within 1e-5.
TEST(Layouts, LlamaCheckpointReshardsBetweenTp1AndTp2) {
  if (world_size() != 2) GTEST_SKIP() << "tp2 on 2 ranks";
  mpi_test::SharedData shared;
  constexpr int kSteps = 5;
  std::vector<std::string> one = llama();
  one.insert(one.end(), {"checkpoint.dir=" + shared.out("ckpt"), "train.steps=5"});
  std::vector<std::string> tp2 = one;
  tp2.push_back("parallel.tensor=2");
  double curve[kSteps] = {};  // the uninterrupted one-process run, step 1 first
  if (world_rank() == 0) {
    mpi_test::Run single(mpi_test::config_for(shared, one), false);
    for (int s = 0; s < kSteps; ++s) {
      curve[s] = single.trainer->train_step().loss;
      if (s == 1) single.trainer->save_checkpoint();
    }
  }
  MPI_Bcast(curve, kSteps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  auto relative = [&](double loss, int step) {
    return std::abs(loss - curve[step - 1]) / curve[step - 1];
  };
  double worst_tp2 = 0, worst_one = 0;
  {
    mpi_test::Run run(mpi_test::config_for(shared, tp2), true);
    EXPECT_TRUE(run.trainer->resume("auto"));
    EXPECT_EQ(run.trainer->step(), 2);
    worst_tp2 = relative(run.trainer->train_step().loss, 3);
    run.trainer->save_checkpoint();
    worst_tp2 = std::max(worst_tp2, relative(run.trainer->train_step().loss, 4));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    mpi_test::Run single(mpi_test::config_for(shared, one), false);
    EXPECT_TRUE(single.trainer->resume("auto"));
    EXPECT_EQ(single.trainer->step(), 3);
    for (int step = 4; step <= kSteps; ++step)
      worst_one = std::max(worst_one, relative(single.trainer->train_step().loss, step));
    std::printf(
        "[ reshard] llama tp1 -> tp2: steps 3-4 within %.1e of one process; tp2 -> tp1: steps "
        "4-5 within %.1e\n",
        worst_tp2, worst_one);
    EXPECT_LT(worst_tp2, 1e-5) << "tp1 -> tp2";
    EXPECT_LT(worst_one, 1e-5) << "tp2 -> tp1";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A context-parallel checkpoint (cp2 on 2 ranks) resumes bit for bit under cp2, and loads into
// one process and into tensor parallelism 2, continuing the loss curve.
TEST(Layouts, ContextParallelCheckpointResumesAndLoadsIntoOtherLayouts) {
  if (world_size() != 2) GTEST_SKIP() << "a cp2 layout on 2 ranks";
  mpi_test::SharedData shared;
  const std::vector<std::string> base = {"checkpoint.dir=" + shared.out("ckpt"), kFlash};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.end(), base.begin(), base.end());
    return mpi_test::config_for(shared, more);
  };
  double continued = 0;
  {
    mpi_test::Run run(with({"parallel.context=2"}), true);
    run.trainer->train_step();
    run.trainer->train_step();
    run.trainer->save_checkpoint();
    continued = run.trainer->train_step().loss;
  }
  {
    mpi_test::Run run(with({"parallel.context=2"}), true);
    EXPECT_TRUE(run.trainer->resume("auto"));
    EXPECT_EQ(run.trainer->train_step().loss, continued);
  }
  {
    mpi_test::Run run(with({"parallel.tensor=2"}), true);
    EXPECT_TRUE(run.trainer->resume("auto"));
    const double loss = run.trainer->train_step().loss;
    EXPECT_LT(std::abs(loss - continued) / continued, 1e-5)
        << "tp2: " << loss << " vs " << continued;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    mpi_test::Run single(with({}), false);
    EXPECT_TRUE(single.trainer->resume("auto"));
    const double loss = single.trainer->train_step().loss;
    EXPECT_LT(std::abs(loss - continued) / continued, 1e-5)
        << "cp1: " << loss << " vs " << continued;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

namespace {

// recompute.auto on a pipeline: under budgets spread from the full-recompute preset's peak to no
// recompute's, every rank's measured total (its categories' peaks summed) stays within the
// budget, every category is the predicted one, and the gradients equal those of no recompute.
TEST(Layouts, AutoPlanFitsItsBudgetOnEveryRank) {
  if (world_size() != 2 && world_size() != 4) GTEST_SKIP() << "pipelines of 2 and 4 stages";
  mpi_test::SharedData shared;
  const std::string pipeline = "parallel.pipeline=" + std::to_string(world_size());
  const std::vector<std::string> layout = {pipeline, "model.num_layers=8"};
  auto largest_total = [&](std::vector<std::string> plan) {
    plan.insert(plan.end(), layout.begin(), layout.end());
    return trainer::summarize_plan(mpi_test::config_for(shared, plan)).peak;
  };
  const int64_t none = largest_total({"recompute.granularity=none"});
  const int64_t full = largest_total(
      {"recompute.granularity=full", "recompute.method=uniform", "recompute.num_layers=1"});
  ASSERT_LT(full, none);
  std::vector<float> reference;
  for (const int64_t budget : {full, (2 * full + none) / 3, (full + 2 * none) / 3, none}) {
    std::vector<std::string> overrides = layout;
    overrides.push_back("recompute.auto=true");
    overrides.push_back("train.memory_budget_gib=" +
                        std::to_string(static_cast<double>(budget) / (1 << 30)));
    const trainer::Config config = mpi_test::config_for(shared, overrides);
    mpi_test::Run run(config, true);
    const trainer::StepMetrics metrics = run.trainer->train_step();
    int64_t total = 0;
    for (const runtime::MemoryCategory c : runtime::kAllMemoryCategories)
      total += metrics.memory[c].peak;
    const int64_t budget_read = trainer::budget_bytes(config.train.memory_budget_gib);
    EXPECT_TRUE(all_ranks(total <= budget_read))
        << "rank " << world_rank() << " measured " << total << " > budget " << budget_read;
    expect_every_category_predicted(run.trainer->config(), metrics, "auto");
    const auto grads = run.trainer->gather(run.trainer->grads());
    if (world_rank() != 0) continue;
    const std::vector<float> flat(grads->flat.f32(), grads->flat.f32() + grads->flat.numel());
    if (reference.empty()) reference = flat;
    EXPECT_TRUE(flat == reference) << "budget " << budget;
  }
}

}  // namespace
