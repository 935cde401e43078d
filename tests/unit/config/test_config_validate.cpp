// validate_config / validate_launch: one test per rule. Each sets a bad value,
// checks the error's YAML path and that the message carries the field(s) and
// value(s), and checks that the nearest good value is accepted.
#include <cmath>
#include <limits>

#include "tests/unit/config/config_test_util.h"

namespace trainer::config_test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(ValidateConfig, DefaultsWithADatasetAreValid) {
  EXPECT_TRUE(accepted(valid_config()));
  EXPECT_TRUE(accepted(non_default_config()));
}

// ---- model ----

TEST(ValidateModel, NumLayersAtLeastOne) {
  Config config = valid_config();
  config.model.num_layers = 0;
  EXPECT_TRUE(rejected(config, "model.num_layers", {"must be >= 1, got 0"}));
  config.model.num_layers = 1;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateModel, HiddenSizeAtLeastOne) {
  Config config = valid_config();
  config.model.hidden_size = -64;
  EXPECT_TRUE(rejected(config, "model.hidden_size", {"must be >= 1, got -64"}));
  config.model.hidden_size = 1;
  config.model.num_attention_heads = 1;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateModel, NumAttentionHeadsAtLeastOne) {
  Config config = valid_config();
  config.model.num_attention_heads = 0;
  EXPECT_TRUE(rejected(config, "model.num_attention_heads", {"must be >= 1, got 0"}));
}

TEST(ValidateModel, HiddenSizeDivisibleByHeads) {
  Config config = valid_config();
  config.model.hidden_size = 100;
  config.model.num_attention_heads = 3;
  EXPECT_TRUE(rejected(config, "model.hidden_size",
                       {"100 is not divisible by model.num_attention_heads 3"}));
  config.model.num_attention_heads = 4;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateModel, FlashHeadDimAtMost128) {
  Config config = valid_config();
  config.model.attention_backend = model::AttentionBackend::flash;
  config.model.hidden_size = 512;
  config.model.num_attention_heads = 2;
  EXPECT_TRUE(rejected(config, "model.attention_backend",
                       {"flash supports head dims up to 128; model.hidden_size 512 / "
                        "model.num_attention_heads 2 = 256"}));
  config.model.num_attention_heads = 4;
  EXPECT_TRUE(accepted(config));
  config.model.attention_backend = model::AttentionBackend::unfused;
  config.model.num_attention_heads = 2;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateModel, FfnHiddenSizeNonNegative) {
  Config config = valid_config();
  config.model.ffn_hidden_size = -5;
  EXPECT_TRUE(rejected(config, "model.ffn_hidden_size", {"must be >= 0, got -5"}));
}

TEST(ValidateModel, SeqLengthAtLeastOne) {
  Config config = valid_config();
  config.model.seq_length = 0;
  EXPECT_TRUE(rejected(config, "model.seq_length", {"must be >= 1, got 0"}));
}

TEST(ValidateModel, MaxPositionEmbeddingsZeroOrAtLeastSeqLength) {
  Config config = valid_config();
  config.model.seq_length = 128;
  config.model.max_position_embeddings = 100;
  EXPECT_TRUE(
      rejected(config, "model.max_position_embeddings", {"model.seq_length 128", "got 100"}));
  config.model.max_position_embeddings = 128;
  EXPECT_TRUE(accepted(config));
  config.model.max_position_embeddings = 0;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateModel, VocabSizeWithinInt32) {
  Config config = valid_config();
  config.model.vocab_size = 0;
  EXPECT_TRUE(rejected(config, "model.vocab_size", {"[1, 2147483647]", "got 0"}));
  config.model.vocab_size = 2147483648;
  EXPECT_TRUE(rejected(config, "model.vocab_size", {"got 2147483648"}));
  config.model.vocab_size = 2147483647;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateModel, MakeVocabSizeDivisibleByAtLeastOne) {
  Config config = valid_config();
  config.model.make_vocab_size_divisible_by = 0;
  EXPECT_TRUE(rejected(config, "model.make_vocab_size_divisible_by", {"must be >= 1, got 0"}));
}

TEST(ValidateModel, DropoutsInUnitInterval) {
  Config config = valid_config();
  config.model.hidden_dropout = 1.f;
  EXPECT_TRUE(rejected(config, "model.hidden_dropout", {"[0, 1)", "got 1"}));
  config.model.hidden_dropout = -0.25f;
  EXPECT_TRUE(rejected(config, "model.hidden_dropout", {"got -0.25"}));
  config.model.hidden_dropout = 0.f;
  config.model.attention_dropout = 1.5f;
  EXPECT_TRUE(rejected(config, "model.attention_dropout", {"[0, 1)", "got 1.5"}));
  config.model.attention_dropout = kNaN;
  EXPECT_TRUE(rejected(config, "model.attention_dropout", {"got .nan"}));
  config.model.attention_dropout = 0.99f;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateModel, InitMethodStdPositive) {
  Config config = valid_config();
  config.model.init_method_std = 0.f;
  EXPECT_TRUE(rejected(config, "model.init_method_std", {"> 0", "got 0"}));
  config.model.init_method_std = kInf;
  EXPECT_TRUE(rejected(config, "model.init_method_std", {"got .inf"}));
}

TEST(ValidateModel, LayernormEpsilonPositive) {
  Config config = valid_config();
  config.model.layernorm_epsilon = -1e-5f;
  EXPECT_TRUE(rejected(config, "model.layernorm_epsilon", {"> 0", "got -1e-05"}));
}

// ---- train ----

TEST(ValidateTrain, StepsNonNegative) {
  Config config = valid_config();
  config.train.steps = -1;
  EXPECT_TRUE(rejected(config, "train.steps", {"must be >= 0, got -1"}));
  config.train.steps = 0;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateTrain, MicroBatchSizeAtLeastOne) {
  Config config = valid_config();
  config.train.micro_batch_size = 0;
  EXPECT_TRUE(rejected(config, "train.micro_batch_size", {"must be >= 1, got 0"}));
}

TEST(ValidateTrain, GlobalBatchSizeAtLeastOne) {
  Config config = valid_config();
  config.train.global_batch_size = -8;
  EXPECT_TRUE(rejected(config, "train.global_batch_size", {"must be >= 1, got -8"}));
}

TEST(ValidateTrain, GlobalBatchDivisibleByMicroBatchTimesData) {
  Config config = valid_config();
  config.train.micro_batch_size = 4;
  config.parallel.data = 3;
  config.train.global_batch_size = 18;
  EXPECT_TRUE(rejected(config, "train.global_batch_size",
                       {"18 is not divisible by train.micro_batch_size 4 x parallel.data 3 = 12"}));
  config.train.global_batch_size = 24;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateTrain, GlobalBatchCheckSurvivesOverflow) {
  Config config = valid_config();
  config.train.micro_batch_size = int64_t{1} << 62;
  config.parallel.data = 4;
  EXPECT_TRUE(rejected(config, "train.global_batch_size", {"overflows"}));
}

TEST(ValidateTrain, LogIntervalAtLeastOne) {
  Config config = valid_config();
  config.train.log_interval = 0;
  EXPECT_TRUE(rejected(config, "train.log_interval", {"must be >= 1, got 0"}));
}

TEST(ValidateTrain, EvalIntervalNonNegative) {
  Config config = valid_config();
  config.train.eval_interval = -10;
  EXPECT_TRUE(rejected(config, "train.eval_interval", {"must be >= 0, got -10"}));
}

TEST(ValidateTrain, SampleTokensLeaveTheLearnedPositionsRoomForAPrompt) {
  Config config = valid_config();
  config.train.sample_interval = -1;
  EXPECT_TRUE(rejected(config, "train.sample_interval", {"must be >= 0, got -1"}));
  config.train.sample_interval = 10;
  config.train.sample_tokens = 0;
  EXPECT_TRUE(rejected(config, "train.sample_tokens", {"got 0"}));
  config.train.sample_tokens = config.model.seq_length;
  EXPECT_TRUE(rejected(config, "train.sample_tokens", {"leaves no room for the prompt"}));
  config.train.sample_tokens = config.model.seq_length - 1;
  EXPECT_TRUE(accepted(config));
  config.train.sample_tokens = 0;
  config.train.sample_interval = 0;  // no samples: sample_tokens is not read
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateTrain, EvalItersNeededWhenEvaluating) {
  Config config = valid_config();
  config.train.eval_iters = 0;
  EXPECT_TRUE(accepted(config));  // eval_interval 0: never evaluates
  config.train.eval_interval = 25;
  EXPECT_TRUE(rejected(config, "train.eval_iters", {"train.eval_interval is 25", "got 0"}));
  config.train.eval_iters = 1;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateTrain, Bf16NeedsCuda) {
  Config config = valid_config();
  config.train.precision = Precision::bf16;
  EXPECT_TRUE(
      rejected(config, "train.precision", {"bf16", "train.device cuda", "got train.device cpu"}));
  config.train.device = Device::cuda;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateTrain, PeakTflopsIsNonNegative) {
  Config config = valid_config();
  config.train.peak_tflops = -1;
  EXPECT_TRUE(rejected(config, "train.peak_tflops", {"must be >= 0", "got -1"}));
  config.train.peak_tflops = std::nan("");
  EXPECT_TRUE(rejected(config, "train.peak_tflops", {"must be >= 0"}));
  config.train.peak_tflops = 312;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateTrain, NcclNeedsCuda) {
  Config config = valid_config();
  config.parallel.backend = parallel::CommBackend::nccl;
  EXPECT_TRUE(
      rejected(config, "parallel.backend", {"nccl", "train.device cuda", "got train.device cpu"}));
  config.train.device = Device::cuda;
  EXPECT_TRUE(accepted(config));
}

// ---- optimizer ----

TEST(ValidateOptimizer, LrPositive) {
  Config config = valid_config();
  config.optimizer.lr = 0.f;
  EXPECT_TRUE(rejected(config, "optimizer.lr", {"> 0", "got 0"}));
  config.optimizer.lr = kNaN;
  EXPECT_TRUE(rejected(config, "optimizer.lr", {"got .nan"}));
}

TEST(ValidateOptimizer, MinLrBetweenZeroAndLr) {
  Config config = valid_config();
  config.optimizer.lr = 0.5f;
  config.optimizer.min_lr = 0.75f;
  EXPECT_TRUE(rejected(config, "optimizer.min_lr", {"optimizer.lr 0.5", "got 0.75"}));
  config.optimizer.min_lr = -0.125f;
  EXPECT_TRUE(rejected(config, "optimizer.min_lr", {"got -0.125"}));
  config.optimizer.min_lr = 0.5f;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateOptimizer, WeightDecayNonNegative) {
  Config config = valid_config();
  config.optimizer.weight_decay = -0.01f;
  EXPECT_TRUE(rejected(config, "optimizer.weight_decay", {">= 0", "got -0.01"}));
  config.optimizer.weight_decay = 0.f;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateOptimizer, AdamBetasInUnitInterval) {
  Config config = valid_config();
  config.optimizer.adam_beta1 = 1.f;
  EXPECT_TRUE(rejected(config, "optimizer.adam_beta1", {"[0, 1)", "got 1"}));
  config.optimizer.adam_beta1 = 0.f;
  config.optimizer.adam_beta2 = -0.5f;
  EXPECT_TRUE(rejected(config, "optimizer.adam_beta2", {"[0, 1)", "got -0.5"}));
  config.optimizer.adam_beta2 = 0.9999f;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateOptimizer, AdamEpsPositive) {
  Config config = valid_config();
  config.optimizer.adam_eps = 0.f;
  EXPECT_TRUE(rejected(config, "optimizer.adam_eps", {"> 0", "got 0"}));
}

TEST(ValidateOptimizer, ClipGradNonNegative) {
  Config config = valid_config();
  config.optimizer.clip_grad = -1.f;
  EXPECT_TRUE(rejected(config, "optimizer.clip_grad", {">= 0", "got -1"}));
  config.optimizer.clip_grad = 0.f;  // disables clipping
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateOptimizer, BucketMbZeroOrInRange) {
  Config config = valid_config();
  config.optimizer.bucket_mb = -1;
  EXPECT_TRUE(rejected(config, "optimizer.bucket_mb", {"0 (one bucket)", "got -1"}));
  config.optimizer.bucket_mb = 1e-6;  // under one KiB
  EXPECT_TRUE(rejected(config, "optimizer.bucket_mb", {"got 1e-06"}));
  config.optimizer.bucket_mb = 1e6;
  EXPECT_TRUE(rejected(config, "optimizer.bucket_mb", {"65536", "got 1e+06"}));
  config.optimizer.bucket_mb = 25;
  config.optimizer.distributed = true;
  EXPECT_TRUE(accepted(config));
  config.optimizer.bucket_mb = 0;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateOptimizer, WarmupAndDecayStepsNonNegative) {
  Config config = valid_config();
  config.optimizer.lr_warmup_steps = -3;
  EXPECT_TRUE(rejected(config, "optimizer.lr_warmup_steps", {"must be >= 0, got -3"}));
  config.optimizer.lr_warmup_steps = 0;
  config.optimizer.lr_decay_steps = -4;
  EXPECT_TRUE(rejected(config, "optimizer.lr_decay_steps", {"must be >= 0, got -4"}));
}

TEST(ValidateOptimizer, WarmupWithinTheDecaySteps) {
  Config config = valid_config();
  config.train.steps = 100;
  config.optimizer.lr_warmup_steps = 101;
  EXPECT_TRUE(rejected(config, "optimizer.lr_warmup_steps",
                       {"101 exceeds the decay steps 100", "train.steps 100"}));
  config.optimizer.lr_warmup_steps = 100;
  EXPECT_TRUE(accepted(config));
  config.optimizer.lr_decay_steps = 60;
  EXPECT_TRUE(rejected(config, "optimizer.lr_warmup_steps",
                       {"100 exceeds the decay steps 60", "optimizer.lr_decay_steps 60"}));
  config.train.steps = 0;  // no training steps: the schedule is never used
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateOptimizer, WsdDecayStepsExactlyWithWsdAndWithinTheDecayAfterWarmup) {
  Config config = valid_config();
  config.train.steps = 100;
  config.optimizer.lr_warmup_steps = 10;
  config.optimizer.lr_decay_style = DecayStyle::wsd;
  EXPECT_TRUE(rejected(config, "optimizer.lr_wsd_decay_steps",
                       {"must be >= 1 with optimizer.lr_decay_style wsd", "got 0"}));
  config.optimizer.lr_wsd_decay_steps = -2;
  EXPECT_TRUE(rejected(config, "optimizer.lr_wsd_decay_steps", {"must be >= 0, got -2"}));
  config.optimizer.lr_wsd_decay_steps = 91;
  EXPECT_TRUE(rejected(config, "optimizer.lr_wsd_decay_steps",
                       {"91 exceeds the 90 decay steps after warmup", "train.steps 100",
                        "optimizer.lr_warmup_steps 10"}));
  config.optimizer.lr_wsd_decay_steps = 90;
  EXPECT_TRUE(accepted(config));
  config.optimizer.lr_decay_steps = 50;
  EXPECT_TRUE(
      rejected(config, "optimizer.lr_wsd_decay_steps",
               {"90 exceeds the 40 decay steps after warmup", "optimizer.lr_decay_steps 50"}));
  config.optimizer.lr_wsd_decay_steps = 40;
  EXPECT_TRUE(accepted(config));
  config.optimizer.lr_decay_style = DecayStyle::cosine;
  EXPECT_TRUE(rejected(config, "optimizer.lr_wsd_decay_steps",
                       {"40 applies to optimizer.lr_decay_style wsd only, not cosine"}));
}

// ---- data ----

TEST(ValidateData, PathNonEmpty) {
  Config config = valid_config();
  config.data.path.clear();
  EXPECT_TRUE(rejected(config, "data.path", {"must name a dataset"}));
}

TEST(ValidateData, PathAndBlendAreExclusive) {
  Config config = valid_config();
  config.data.blend = {{.path = "data/web", .weight = 0.7}, {.path = "data/code", .weight = 0.3}};
  EXPECT_TRUE(
      rejected(config, "data.path", {"'data/corpus'", "data.blend (2 datasets)", "exclusive"}));
  config.data.path.clear();
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateData, BlendWeightsPositiveAndFinite) {
  Config config = valid_config();
  config.data.path.clear();
  config.data.blend = {{.path = "data/web", .weight = 0.7}, {.path = "data/code", .weight = -0.3}};
  EXPECT_TRUE(rejected(config, "data.blend[1].weight",
                       {"data.blend[1].weight: -0.3 must be > 0", "'data/code'"}));
  config.data.blend[1].weight = 0;
  EXPECT_TRUE(rejected(config, "data.blend[1].weight", {"0 must be > 0"}));
  config.data.blend[1].weight = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(rejected(config, "data.blend[1].weight", {".inf must be > 0 and finite"}));
  config.data.blend[1].weight = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(rejected(config, "data.blend[1].weight", {".nan"}));
  config.data.blend[1] = {.path = "", .weight = 1};
  EXPECT_TRUE(rejected(config, "data.blend[1].path", {"must name a dataset"}));
  config.data.blend = {{.path = "data/web", .weight = 5}};  // one dataset is a blend too
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateData, DataSourcesAreTheBlendOrThePathWithWeightOne) {
  Config config = valid_config();
  EXPECT_EQ(data_sources(config.data),
            (std::vector<BlendEntry>{{.path = "data/corpus", .weight = 1.0}}));
  config.data.path.clear();
  config.data.blend = {{.path = "a", .weight = 2}, {.path = "b", .weight = 6}};
  EXPECT_EQ(data_sources(config.data), config.data.blend);
}

TEST(ValidateData, SplitHasOneToThreeEntries) {
  Config config = valid_config();
  config.data.split = {};
  EXPECT_TRUE(rejected(config, "data.split", {"1 to 3 entries", "got 0"}));
  config.data.split = {90, 5, 4, 1};
  EXPECT_TRUE(rejected(config, "data.split", {"1 to 3 entries", "got 4"}));
  config.data.split = {90, 5, 5};
  EXPECT_TRUE(accepted(config));
  config.data.split = {1};
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateData, SplitEntriesFiniteAndNonNegative) {
  Config config = valid_config();
  config.data.split = {98, -2};
  EXPECT_TRUE(rejected(config, "data.split[1]", {">= 0", "got -2"}));
  config.data.split = {98, 2, std::numeric_limits<double>::infinity()};
  EXPECT_TRUE(rejected(config, "data.split[2]", {"finite", "got .inf"}));
  config.data.split = {98, 0};
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateData, SplitTrainWeightPositive) {
  Config config = valid_config();
  config.data.split = {0, 2};
  EXPECT_TRUE(rejected(config, "data.split[0]", {"> 0", "got 0"}));
}

TEST(ValidateData, EvaluationNeedsAValidationWeight) {
  Config config = valid_config();
  config.train.eval_interval = 50;
  config.data.split = {100};
  EXPECT_TRUE(rejected(config, "data.split", {"train.eval_interval is 50", "no second entry"}));
  config.data.split = {100, 0};
  EXPECT_TRUE(rejected(config, "data.split", {"train.eval_interval is 50", "got 0"}));
  config.data.split = {100, 0.5};
  EXPECT_TRUE(accepted(config));
}

// ---- parallel ----

TEST(ValidateParallel, SizesAtLeastOne) {
  for (const char* name : {"tensor", "pipeline", "data", "virtual_pipeline"}) {
    Config config = valid_config();
    const std::string key = name;
    int64_t& size = key == "tensor"     ? config.parallel.tensor
                    : key == "pipeline" ? config.parallel.pipeline
                    : key == "data"     ? config.parallel.data
                                        : config.parallel.virtual_pipeline;
    size = 0;
    EXPECT_TRUE(rejected(config, "parallel." + key, {"must be >= 1, got 0"}));
  }
}

TEST(ValidateParallel, HeadsDivisibleByTensor) {
  Config config = valid_config();
  config.model.hidden_size = 96;
  config.model.num_attention_heads = 6;
  config.parallel.tensor = 4;
  EXPECT_TRUE(
      rejected(config, "model.num_attention_heads", {"6 is not divisible by parallel.tensor 4"}));
  config.parallel.tensor = 3;
  EXPECT_TRUE(accepted(config));
}

// With ffn_hidden_size 0 the FFN is 4 x hidden_size, which the heads rules
// already make divisible by tensor; only an explicit size can break this rule.
TEST(ValidateParallel, FfnDivisibleByTensor) {
  Config config = valid_config();
  config.parallel.tensor = 2;
  config.model.ffn_hidden_size = 101;
  EXPECT_TRUE(rejected(config, "model.ffn_hidden_size",
                       {"FFN size 101 is not divisible by parallel.tensor 2"}));
  config.model.ffn_hidden_size = 102;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateParallel, LayersDivisibleByPipelineTimesVirtual) {
  Config config = valid_config();
  config.model.num_layers = 10;
  config.parallel.pipeline = 2;
  config.parallel.virtual_pipeline = 3;
  EXPECT_TRUE(
      rejected(config, "model.num_layers",
               {"10 is not divisible by parallel.pipeline 2 x parallel.virtual_pipeline 3 = 6"}));
  config.model.num_layers = 12;
  config.train.global_batch_size = 16;  // 2 microbatches: interleaving needs a multiple of 2 stages
  EXPECT_TRUE(accepted(config));
  config.parallel.virtual_pipeline = 1;
  config.parallel.pipeline = 5;
  config.model.num_layers = 12;
  EXPECT_TRUE(rejected(config, "model.num_layers", {"12 is not divisible by parallel.pipeline 5"}));
}

TEST(ValidateParallel, LayersPerStageLengthMatchesPipeline) {
  Config config = valid_config();
  config.model.num_layers = 6;
  config.parallel.pipeline = 2;
  config.parallel.layers_per_stage = {1, 2, 3};
  EXPECT_TRUE(
      rejected(config, "parallel.layers_per_stage", {"has 3 entries but parallel.pipeline is 2"}));
  config.parallel.layers_per_stage = {1, 5};
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateParallel, LayersPerStageEntriesAtLeastOne) {
  Config config = valid_config();
  config.model.num_layers = 6;
  config.parallel.pipeline = 3;
  config.parallel.layers_per_stage = {3, 0, 3};
  EXPECT_TRUE(rejected(config, "parallel.layers_per_stage[1]", {"must be >= 1, got 0"}));
}

TEST(ValidateParallel, LayersPerStageSumsToNumLayers) {
  Config config = valid_config();
  config.model.num_layers = 7;  // not divisible by 3: the explicit list allows it
  config.parallel.pipeline = 3;
  config.parallel.layers_per_stage = {2, 2, 2};
  EXPECT_TRUE(rejected(config, "parallel.layers_per_stage", {"sum to 6", "model.num_layers is 7"}));
  config.parallel.layers_per_stage = {2, 3, 2};
  EXPECT_TRUE(accepted(config));
  config.parallel.layers_per_stage = {std::numeric_limits<int64_t>::max(), 1, 1};
  EXPECT_TRUE(rejected(config, "parallel.layers_per_stage", {"more than int64"}));
}

TEST(ValidateParallel, LayersPerStageNeedsNoVirtualPipeline) {
  Config config = valid_config();
  config.model.num_layers = 4;
  config.parallel.pipeline = 2;
  config.parallel.layers_per_stage = {1, 3};
  config.parallel.virtual_pipeline = 2;
  EXPECT_TRUE(rejected(config, "parallel.virtual_pipeline",
                       {"must be 1 when parallel.layers_per_stage is given, got 2"}));
}

TEST(ValidateParallel, VirtualPipelineNeedsPipeline) {
  Config config = valid_config();
  config.model.num_layers = 4;
  config.parallel.virtual_pipeline = 2;
  EXPECT_TRUE(
      rejected(config, "parallel.virtual_pipeline", {"2 requires parallel.pipeline > 1, got 1"}));
  config.parallel.pipeline = 2;
  config.train.global_batch_size = 16;  // 2 microbatches: interleaving needs a multiple of 2 stages
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateParallel, SequenceParallelNeedsSeqLengthDivisibleByTensor) {
  Config config = valid_config();
  config.model.seq_length = 30;
  config.parallel.tensor = 2;
  config.parallel.sequence_parallel = true;
  EXPECT_TRUE(accepted(config));
  config.model.num_attention_heads = 4;
  config.parallel.tensor = 4;
  EXPECT_TRUE(
      rejected(config, "parallel.sequence_parallel", {"model.seq_length 30", "parallel.tensor 4"}));
  config.parallel.sequence_parallel = false;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateParallel, ContextAtLeastOne) {
  Config config = valid_config();
  config.parallel.context = 0;
  EXPECT_TRUE(rejected(config, "parallel.context", {"must be >= 1, got 0"}));
}

TEST(ValidateParallel, ContextNeedsSeqLengthDivisibleByTwiceContext) {
  Config config = valid_config();
  config.model.attention_backend = model::AttentionBackend::flash;
  config.model.seq_length = 36;
  config.parallel.context = 4;
  EXPECT_TRUE(
      rejected(config, "model.seq_length", {"36 is not divisible by 2 x parallel.context 4 = 8"}));
  config.model.seq_length = 40;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateParallel, ContextNeedsFlashAttention) {
  Config config = valid_config();
  config.parallel.context = 2;
  config.model.attention_backend = model::AttentionBackend::unfused;
  EXPECT_TRUE(rejected(config, "model.attention_backend",
                       {"must be flash when parallel.context is 2", "got unfused"}));
  config.model.attention_backend = model::AttentionBackend::flash;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateParallel, SequenceParallelUnderContextSplitsTheLocalRows) {
  Config config = valid_config();
  config.model.attention_backend = model::AttentionBackend::flash;
  config.model.seq_length = 48;
  config.parallel.context = 2;  // 24 local rows
  config.parallel.tensor = 2;
  config.parallel.sequence_parallel = true;
  EXPECT_TRUE(accepted(config));
  config.model.num_attention_heads = 4;
  config.parallel.context = 4;  // 12 local rows
  config.parallel.tensor = 4;
  config.model.seq_length = 40;  // 10 local rows: not divisible by 4
  EXPECT_TRUE(rejected(config, "parallel.sequence_parallel",
                       {"model.seq_length 40 / parallel.context 4 = 10", "parallel.tensor 4"}));
}

TEST(ValidateParallel, SequenceParallelWithoutTensorParallelIsAccepted) {
  Config config = valid_config();
  config.model.seq_length = 31;
  config.parallel.sequence_parallel = true;
  EXPECT_TRUE(accepted(config));
}

// ---- output ----

TEST(ValidateOutput, DirNonEmpty) {
  Config config = valid_config();
  config.output.dir.clear();
  EXPECT_TRUE(rejected(config, "output.dir", {"must not be empty"}));
}

// ---- trace ----

TEST(ValidateTrace, StepsNonNegative) {
  Config config = valid_config();
  config.train.trace.steps = -2;
  EXPECT_TRUE(rejected(config, "train.trace.steps", {"must be >= 0, got -2"}));
  config.train.trace.steps = 0;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateTrace, StartStepWithinTheRun) {
  Config config = valid_config();
  config.train.steps = 20;
  config.train.trace = {.start_step = 0, .steps = 3};
  EXPECT_TRUE(rejected(config, "train.trace.start_step", {"must be >= 1, got 0"}));
  config.train.trace.start_step = 21;
  EXPECT_TRUE(rejected(config, "train.trace.start_step", {"21", "train.steps 20"}));
  config.train.trace.start_step = 20;  // a window past the last step is cut at the run's end
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateMemoryTimeline, StepWithinTheRun) {
  Config config = valid_config();
  config.train.steps = 20;
  config.train.memory_timeline_step = -1;
  EXPECT_TRUE(rejected(config, "train.memory_timeline_step", {"must be >= 0, got -1"}));
  config.train.memory_timeline_step = 21;
  EXPECT_TRUE(rejected(config, "train.memory_timeline_step", {"21", "train.steps 20"}));
  config.train.memory_timeline_step = 20;
  EXPECT_TRUE(accepted(config));
  config.train.memory_timeline_step = 0;  // off
  EXPECT_TRUE(accepted(config));
}

// ---- launch ----

TEST(ValidateLaunch, WorldSizeMatchesTheLayout) {
  Config config = valid_config();
  config.parallel.tensor = 2;
  config.parallel.pipeline = 2;
  config.parallel.data = 3;
  EXPECT_NO_THROW(validate_launch(config, 12));
  EXPECT_TRUE(throws_config_error(
      [&] { validate_launch(config, 8); }, "parallel",
      {"launched with 8 ranks but tensor 2 x context 1 x pipeline 2 x data 3 = 12"}));
  config.parallel.data = 1;
  EXPECT_TRUE(throws_config_error([&] { validate_launch(config, 12); }, "parallel",
                                  {"launched with 12 ranks", "= 4"}));
  config.parallel.context = 3;
  EXPECT_NO_THROW(validate_launch(config, 12));
  EXPECT_TRUE(throws_config_error([&] { validate_launch(config, 4); }, "parallel",
                                  {"launched with 4 ranks", "context 3", "= 12"}));
}

TEST(ValidateConfig, ParseConfigValidates) {
  EXPECT_TRUE(parse_rejected(
      "data: {path: d}\ntrain: {micro_batch_size: 3}\n", {}, "train.global_batch_size",
      {"8 is not divisible by train.micro_batch_size 3 x parallel.data 1 = 3"}));
}

// ---- the planner's keys ----

TEST(ValidatePlanner, AutoNeedsABudgetAndNothingElseInTheSection) {
  Config config = valid_config();
  config.recompute.automatic = true;
  EXPECT_TRUE(rejected(config, "recompute.auto", {"needs train.memory_budget_gib", "got 0"}));
  config.train.memory_budget_gib = 40;
  EXPECT_TRUE(accepted(config));
  config.recompute.preset.granularity = model::RecomputeMode::selective;
  EXPECT_TRUE(rejected(config, "recompute.auto", {"the planner chooses every layer"}));
  config.recompute.preset.granularity = model::RecomputeMode::none;
  config.recompute.layers.push_back({0, 0, {}});
  EXPECT_TRUE(rejected(config, "recompute.auto", {"remove recompute.granularity"}));
}

TEST(ValidatePlanner, BudgetIsNonNegativeAndFinite) {
  Config config = valid_config();
  config.train.memory_budget_gib = -1;
  EXPECT_TRUE(rejected(config, "train.memory_budget_gib", {"must be >= 0 (0: no budget), got -1"}));
  config.train.memory_budget_gib = 0;
  EXPECT_TRUE(accepted(config));
}

// Llama's fields: heads per kv group, whole groups per tensor-parallel rank, an even head dim
// for RoPE, a rotary base above 1, and an export (or import) only of the HF class's blocks.
Config llama_config() {
  Config config = valid_config();
  const model::GptConfig shape = config.model;
  config.model = model::architecture_defaults(model::Architecture::llama);
  config.model.num_layers = shape.num_layers;
  config.model.hidden_size = 64;
  config.model.num_attention_heads = 8;
  config.model.num_query_groups = 2;
  config.model.seq_length = shape.seq_length;
  config.model.vocab_size = shape.vocab_size;
  return config;
}

TEST(ValidateLlama, GroupsDivideHeadsAndTensorParallelismSplitsWholeGroups) {
  Config config = llama_config();
  EXPECT_TRUE(accepted(config));
  config.model.num_query_groups = 3;
  EXPECT_TRUE(
      rejected(config, "model.num_query_groups",
               {"model.num_attention_heads 8 is not divisible by model.num_query_groups 3"}));
  config.model.num_query_groups = 2;
  config.parallel.tensor = 4;
  EXPECT_TRUE(rejected(config, "model.num_query_groups",
                       {"2 key/value heads are not divisible by parallel.tensor 4"}));
  config.parallel.tensor = 2;
  EXPECT_TRUE(accepted(config));
}

TEST(ValidateLlama, RopeNeedsAnEvenHeadDimAndABaseAboveOne) {
  Config config = llama_config();
  config.model.hidden_size = 72;  // head dim 9
  EXPECT_TRUE(rejected(config, "model.position_embedding", {"rope needs an even head dim", "= 9"}));
  config.model.hidden_size = 64;
  config.model.rotary_base = 1.0f;
  EXPECT_TRUE(rejected(config, "model.rotary_base", {"must be > 1, got 1"}));
}

// model.kv_channels: heads of their own width (hidden_size then need not divide by the heads);
// RoPE and flash check that width; GPT2LMHeadModel has no place for it.
TEST(ValidateLlama, KvChannelsSetsTheHeadWidth) {
  Config config = llama_config();
  config.model.hidden_size = 68;  // not divisible by 8 heads
  EXPECT_TRUE(rejected(config, "model.hidden_size", {"not divisible", "model.kv_channels"}));
  config.model.kv_channels = 16;
  EXPECT_TRUE(accepted(config));
  config.model.kv_channels = 9;
  EXPECT_TRUE(rejected(config, "model.position_embedding",
                       {"rope needs an even head dim", "model.kv_channels 9"}));
  config.model.kv_channels = -1;
  EXPECT_TRUE(rejected(config, "model.kv_channels", {"-1"}));
  config.model.kv_channels = 512;
  config.model.attention_backend = model::AttentionBackend::flash;
  EXPECT_TRUE(rejected(config, "model.attention_backend", {"model.kv_channels 512"}));
  Config gpt2 = valid_config();
  gpt2.model.kv_channels = 2 * gpt2.model.head_dim();
  gpt2.output.export_model = true;
  EXPECT_TRUE(rejected(gpt2, "output.export", {"GPT2LMHeadModel", "model.kv_channels"}));
  gpt2.output.export_model = false;
  EXPECT_TRUE(accepted(gpt2));
}

// model.sliding_window: 0 or more positions; the export writes MistralForCausalLM for a Llama
// block, which has no RoPE scaling, and GPT2LMHeadModel has no place for a window.
TEST(ValidateLlama, SlidingWindowIsExportedAsMistrals) {
  Config config = llama_config();
  config.model.sliding_window = -1;
  EXPECT_TRUE(rejected(config, "model.sliding_window", {"-1"}));
  config.model.sliding_window = 4;
  config.output.export_model = true;
  EXPECT_TRUE(accepted(config));
  config.model.rope_scaling.factor = 8.f;
  EXPECT_TRUE(
      rejected(config, "output.export", {"MistralForCausalLM", "model.rope_scaling.factor 8"}));
  Config gpt2 = valid_config();
  gpt2.model.sliding_window = 4;
  gpt2.output.export_model = false;
  EXPECT_TRUE(accepted(gpt2));
  gpt2.output.export_model = true;
  EXPECT_TRUE(rejected(gpt2, "output.export", {"GPT2LMHeadModel", "model.sliding_window 4"}));
}

// YaRN's scaling: beta_fast above beta_slow above 0; Llama 3.1's frequency factors unread.
TEST(ValidateLlama, YarnScalingNeedsItsBetas) {
  Config config = llama_config();
  config.model.rope_scaling = {.type = runtime::RopeScalingType::yarn, .factor = 4.f};
  config.model.rope_scaling.high_freq_factor = 0.5f;  // llama3's field: not read under yarn
  EXPECT_TRUE(accepted(config));
  config.model.rope_scaling.beta_fast = 1.f;
  EXPECT_TRUE(rejected(config, "model.rope_scaling.beta_fast",
                       {"above model.rope_scaling.beta_slow 1", "got 1"}));
  config.model.rope_scaling.beta_slow = 0.f;
  EXPECT_TRUE(rejected(config, "model.rope_scaling.beta_slow", {"0"}));
}

// model.qk_layernorm: the block's RMSNorm on each q and k head; a LayerNorm block refuses it, and
// GPT2LMHeadModel has no place for it.
TEST(ValidateLlama, QkLayernormNeedsRmsnorm) {
  Config config = llama_config();
  config.model.qk_layernorm = true;
  EXPECT_TRUE(accepted(config));
  Config gpt2 = valid_config();
  gpt2.model.qk_layernorm = true;
  EXPECT_TRUE(rejected(gpt2, "model.qk_layernorm", {"needs model.normalization rmsnorm"}));
  gpt2.model.normalization = model::Normalization::rmsnorm;
  gpt2.output.export_model = true;
  EXPECT_TRUE(rejected(gpt2, "output.export", {"GPT2LMHeadModel", "model.normalization rmsnorm"}));
}

TEST(ValidateLlama, RopeScalingNeedsRotaryPositionsAndOrderedBands) {
  Config config = llama_config();
  config.model.rope_scaling = {.factor = 8.f,
                               .low_freq_factor = 1.f,
                               .high_freq_factor = 4.f,
                               .original_max_position_embeddings = 8192};
  EXPECT_TRUE(accepted(config));
  config.model.rope_scaling.factor = 0.5f;
  EXPECT_TRUE(rejected(config, "model.rope_scaling.factor",
                       {"must be 0 (off) or finite and >= 1, got 0.5"}));
  config.model.rope_scaling.factor = 8.f;
  config.model.rope_scaling.low_freq_factor = 0.f;
  EXPECT_TRUE(rejected(config, "model.rope_scaling.low_freq_factor", {"> 0, got 0"}));
  config.model.rope_scaling.low_freq_factor = 4.f;
  EXPECT_TRUE(rejected(config, "model.rope_scaling.high_freq_factor",
                       {"above model.rope_scaling.low_freq_factor 4, got 4"}));
  config.model.rope_scaling.low_freq_factor = 1.f;
  config.model.rope_scaling.original_max_position_embeddings = 0;
  EXPECT_TRUE(rejected(config, "model.rope_scaling.original_max_position_embeddings",
                       {"must be >= 1, got 0"}));
  Config gpt = valid_config();
  gpt.model.rope_scaling.factor = 8.f;
  EXPECT_TRUE(rejected(gpt, "model.rope_scaling.factor",
                       {"8 scales rotary positions, but model.position_embedding is learned"}));
}

TEST(ValidateLlama, TheExportAndTheImportTakeOnlyTheirClassesBlocks) {
  Config config = llama_config();
  config.output.export_model = true;
  config.model.add_bias_linear = true;
  EXPECT_TRUE(rejected(config, "output.export",
                       {"LlamaForCausalLM", "model.add_bias_linear true", "output.export false"}));
  config.output.export_model = false;
  EXPECT_TRUE(accepted(config));
  config.train.init_from = "weights.safetensors";
  EXPECT_TRUE(rejected(config, "train.init_from", {"LlamaForCausalLM", "model.add_bias_linear"}));
  Config gpt = valid_config();
  gpt.output.export_model = true;
  gpt.model.normalization = model::Normalization::rmsnorm;
  EXPECT_TRUE(rejected(gpt, "output.export", {"GPT2LMHeadModel", "model.normalization rmsnorm"}));
}

TEST(ValidateLlama, ArchitectureSetsDefaultsTheConfigsFieldsOverride) {
  const Config config = parse_config(
      "model: {architecture: llama, hidden_size: 64, num_attention_heads: 4,\n"
      "        normalization: layernorm}\noutput: {export: false}\n",
      "test", {"model.untie_embeddings=false"}, ConfigUse::plan);
  EXPECT_EQ(config.model.architecture, model::Architecture::llama);
  EXPECT_EQ(config.model.normalization, model::Normalization::layernorm);  // the file's
  EXPECT_FALSE(config.model.untie_embeddings);                             // the override's
  EXPECT_TRUE(config.model.swiglu());                                      // llama's default
  EXPECT_FALSE(config.model.learned_positions());
  EXPECT_FALSE(config.model.add_bias_linear);
}

}  // namespace
}  // namespace trainer::config_test
