// YAML -> Config: defaults, every key name, strict types, unknown keys with their
// paths, malformed YAML, --set overrides, and the to_yaml round trip.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tests/unit/config/config_test_util.h"

namespace trainer::config_test {
namespace {

// non_default_config(), spelled out: proves the YAML key names, not only that
// to_yaml and parse_config agree with each other.
constexpr const char* kEveryKeyYaml = R"(
model:
  num_layers: 6
  hidden_size: 96
  num_attention_heads: 4
  ffn_hidden_size: 200
  seq_length: 48
  max_position_embeddings: 96
  vocab_size: 1000
  make_vocab_size_divisible_by: 64
  hidden_dropout: 0.123456789
  attention_dropout: 0.25
  init_method_std: 0.0173
  layernorm_epsilon: 1e-6
  activation: gelu
  sliding_window: 7
train:
  steps: 50
  micro_batch_size: 2
  global_batch_size: 12
  seed: 18446744073709551615
  log_interval: 5
  eval_interval: 10
  eval_iters: 3
  exit_duration_minutes: 90.5
  device: cuda
  precision: bf16
  guard: {action: skip_step, loss_spike_factor: 2.5, window: 20, max_rewinds: 1}
  inject: {step: 9, scale_loss: 1000}
optimizer:
  lr: 3e-4
  min_lr: 3.0e-5
  weight_decay: 0.1
  adam_beta1: 0.85
  adam_beta2: 0.95
  adam_eps: 1e-7
  clip_grad: 0.5
  lr_warmup_steps: 10
  lr_decay_steps: 40
  lr_decay_style: wsd
  lr_wsd_decay_steps: 20
  lr_wsd_decay_style: minus_sqrt
data:
  path: "data/my corpus: v2"
  split: [0.1, 0.25, 7]
  shuffle: true
  skip_batches: [[3, 4], [10, 10]]
parallel:
  tensor: 2
  pipeline: 3
  data: 2
  virtual_pipeline: 1
  sequence_parallel: true
  layers_per_stage: [1, 2, 3]
  backend: nccl
output:
  dir: "runs/x #1"
  export: false
targets:
  min_tokens_per_s: 1500.5
  max_memory_gib: 0.75
  max_loss: {at_step: 40, value: 2.25}
  window: 7
  action: warn
  throughput_drift_fraction: 0.3
)";

const std::vector<std::string> kWithData = {"data.path=data/corpus"};

TEST(ConfigParse, EmptyDocumentGivesTheDefaults) {
  for (const char* empty : {"", "# only a comment\n", "~\n", "model:\ntrain:\n"}) {
    SCOPED_TRACE(empty);
    expect_same_config(parse_config(empty, "empty.yaml", kWithData), valid_config());
  }
}

TEST(ConfigParse, DefaultsLackOnlyTheDatasetPath) {
  EXPECT_TRUE(parse_rejected("", {}, "data.path", {"must name a dataset"}));
}

TEST(ConfigParse, ReadsEveryKey) {
  expect_same_config(parse_config(kEveryKeyYaml, "every.yaml"), non_default_config());
}

TEST(ConfigParse, AcceptsYamlNumberSpellings) {
  const Config config = parse_config(
      "model: {hidden_size: +64, hidden_dropout: 0}\n"
      "optimizer: {lr: 1E-3, clip_grad: .5}\n",
      "test.yaml", kWithData);
  EXPECT_EQ(config.model.hidden_size, 64);
  EXPECT_EQ(config.model.hidden_dropout, 0.f);
  EXPECT_EQ(config.optimizer.lr, 1e-3f);
  EXPECT_EQ(config.optimizer.clip_grad, 0.5f);
}

// model.rope_scaling: the fields given, the others at Llama 3.1's values, and the same after
// to_yaml.
TEST(ConfigParse, RopeScalingParsesAndRoundTrips) {
  const Config config = parse_config(
      "model: {architecture: llama, hidden_size: 64, num_attention_heads: 4,\n"
      "        rope_scaling: {factor: 32, original_max_position_embeddings: 4096}}\n",
      "t.yaml", kWithData);
  for (const Config& c : {config, parse_config(to_yaml(config), "round trip")}) {
    EXPECT_EQ(c.model.rope_scaling.factor, 32.f);
    EXPECT_EQ(c.model.rope_scaling.low_freq_factor, 1.f);
    EXPECT_EQ(c.model.rope_scaling.high_freq_factor, 4.f);
    EXPECT_EQ(c.model.rope_scaling.original_max_position_embeddings, 4096);
  }
  EXPECT_FALSE(parse_config("model: {architecture: llama}\n", "t.yaml", kWithData)
                   .model.rope_scaling.enabled());
  EXPECT_TRUE(parse_rejected("model: {architecture: llama, rope_scaling: {rope_type: yarn}}\n",
                             kWithData, "model.rope_scaling.rope_type",
                             {"unknown key", "type, factor, low_freq_factor"}));
  // YaRN: its type and betas.
  const Config yarn = parse_config(
      "model: {architecture: llama, rope_scaling: {type: yarn, factor: 4, beta_fast: 16}}\n",
      "t.yaml", kWithData);
  for (const Config& c : {yarn, parse_config(to_yaml(yarn), "round trip")}) {
    EXPECT_EQ(c.model.rope_scaling.type, runtime::RopeScalingType::yarn);
    EXPECT_EQ(c.model.rope_scaling.beta_fast, 16.f);
    EXPECT_EQ(c.model.rope_scaling.beta_slow, 1.f);
  }
  EXPECT_TRUE(parse_rejected("model: {architecture: llama, rope_scaling: {type: ntk}}\n",
                             kWithData, "model.rope_scaling.type", {"ntk", "llama3", "yarn"}));
}

TEST(ConfigParse, RejectsUnknownTopLevelSection) {
  EXPECT_TRUE(parse_rejected(
      "modle: {num_layers: 2}\n", kWithData, "modle",
      {"unknown key", "model, train, optimizer, data, parallel, recompute, checkpoint, output"}));
}

TEST(ConfigParse, RejectsUnknownKeyInSectionAndListsTheKnownOnes) {
  EXPECT_TRUE(parse_rejected(
      "model:\n  hiden_size: 64\n", kWithData, "model.hiden_size",
      {"unknown key (known: architecture, num_layers, hidden_size,", "attention_backend)"}));
  EXPECT_TRUE(parse_rejected("output: {exports: true}\n", kWithData, "output.exports",
                             {"unknown key (known: dir, export, export_dtype, tensorboard)"}));
  EXPECT_TRUE(parse_rejected("parallel: {tensor: 1, seq_parallel: true}\n", kWithData,
                             "parallel.seq_parallel", {"unknown key", "sequence_parallel"}));
}

TEST(ConfigParse, RejectsKeysUnderAScalarOrList) {
  EXPECT_TRUE(parse_rejected("model: {hidden_size: {value: 64}}\n", kWithData, "model.hidden_size",
                             {"expected an integer, got a map"}));
  EXPECT_TRUE(parse_rejected("data: {split: {train: 98}}\n", kWithData, "data.split",
                             {"expected a list, got a map"}));
}

TEST(ConfigParse, RejectsDuplicateAndNonScalarKeys) {
  EXPECT_TRUE(parse_rejected("model: {num_layers: 2, num_layers: 4}\n", kWithData,
                             "model.num_layers", {"duplicate key"}));
  EXPECT_TRUE(parse_rejected("model: {[a, b]: 2}\n", kWithData, "model", {"got the key a list"}));
}

TEST(ConfigParse, IntegersAreStrict) {
  EXPECT_TRUE(parse_rejected("model: {hidden_size: abc}\n", kWithData, "model.hidden_size",
                             {"expected an integer, got 'abc'"}));
  EXPECT_TRUE(parse_rejected("model: {hidden_size: 12.5}\n", kWithData, "model.hidden_size",
                             {"expected an integer, got '12.5'"}));
  EXPECT_TRUE(parse_rejected("train: {steps: 1e3}\n", kWithData, "train.steps", {"'1e3'"}));
  EXPECT_TRUE(parse_rejected("model: {vocab_size: 9223372036854775808}\n", kWithData,
                             "model.vocab_size", {"'9223372036854775808'", "out of"}));
  EXPECT_TRUE(parse_rejected("model: {num_layers: }\n", kWithData, "model.num_layers",
                             {"expected an integer, got null"}));
  EXPECT_TRUE(parse_rejected("model: {num_layers: [2]}\n", kWithData, "model.num_layers",
                             {"expected an integer, got a list"}));
}

TEST(ConfigParse, SeedIsANonNegative64BitInteger) {
  EXPECT_TRUE(
      parse_rejected("train: {seed: -1}\n", kWithData, "train.seed", {"non-negative", "'-1'"}));
  EXPECT_TRUE(parse_rejected("train: {seed: 18446744073709551616}\n", kWithData, "train.seed",
                             {"'18446744073709551616'", "out of"}));
  EXPECT_EQ(parse_config("train: {seed: 0}\n", "t.yaml", kWithData).train.seed, 0u);
}

TEST(ConfigParse, FloatsRejectTextAndOverflow) {
  EXPECT_TRUE(parse_rejected("optimizer: {lr: fast}\n", kWithData, "optimizer.lr",
                             {"expected a number, got 'fast'"}));
  EXPECT_TRUE(parse_rejected("optimizer: {lr: 1e39}\n", kWithData, "optimizer.lr",
                             {"'1e39'", "out of range"}));
  EXPECT_TRUE(parse_rejected("optimizer: {lr: {a: 1}}\n", kWithData, "optimizer.lr",
                             {"expected a number, got a map"}));
}

TEST(ConfigParse, BooleansAreTrueOrFalseOnly) {
  for (const char* spelling : {"yes", "1", "True", "on"}) {
    EXPECT_TRUE(parse_rejected(std::string("data: {shuffle: ") + spelling + "}\n", kWithData,
                               "data.shuffle", {"expected true or false", spelling}));
  }
  EXPECT_TRUE(parse_config("data: {shuffle: true}\n", "t.yaml", kWithData).data.shuffle);
}

TEST(ConfigParse, EnumsListTheAllowedNames) {
  EXPECT_TRUE(parse_rejected("model: {activation: relu}\n", kWithData, "model.activation",
                             {"'relu'", "gelu_tanh, gelu"}));
  EXPECT_TRUE(parse_rejected("model: {attention_backend: fused}\n", kWithData,
                             "model.attention_backend", {"'fused'", "unfused, flash"}));
  EXPECT_EQ(parse_config("model: {attention_backend: flash}\n", "t.yaml", kWithData)
                .model.attention_backend,
            model::AttentionBackend::flash);
  EXPECT_TRUE(
      parse_rejected("train: {device: gpu}\n", kWithData, "train.device", {"'gpu'", "cpu, cuda"}));
  EXPECT_TRUE(parse_rejected("train: {precision: fp16}\n", kWithData, "train.precision",
                             {"'fp16'", "auto, fp32, bf16"}));
  EXPECT_TRUE(parse_rejected("optimizer: {lr_decay_style: step}\n", kWithData,
                             "optimizer.lr_decay_style",
                             {"'step'", "constant, linear, cosine, inverse_square_root, wsd"}));
  EXPECT_TRUE(parse_rejected("optimizer: {lr_decay_style: wsd, lr_wsd_decay_style: sqrt}\n",
                             kWithData, "optimizer.lr_wsd_decay_style",
                             {"'sqrt'", "exponential, linear, cosine, minus_sqrt"}));
  EXPECT_TRUE(parse_rejected("parallel: {backend: gloo}\n", kWithData, "parallel.backend",
                             {"'gloo'", "auto, mpi, nccl"}));
  EXPECT_EQ(parse_config("parallel: {backend: auto}\n", "t.yaml", kWithData).parallel.backend,
            parallel::CommBackend::automatic);
}

TEST(ConfigParse, PrecisionDefaultsToBf16OnCudaAndFp32OnCpu) {
  EXPECT_EQ(parse_config("", "t.yaml", kWithData).train.precision, Precision::fp32);
  EXPECT_EQ(parse_config("train: {device: cuda}\n", "t.yaml", kWithData).train.precision,
            Precision::bf16);
  EXPECT_EQ(
      parse_config("train: {device: cuda, precision: fp32}\n", "t.yaml", kWithData).train.precision,
      Precision::fp32);
  EXPECT_EQ(
      parse_config("train: {precision: auto}\n", "t.yaml", {"data.path=d", "train.device=cuda"})
          .train.precision,
      Precision::bf16);
  TrainConfig train;  // precision auto
  EXPECT_FALSE(uses_bf16(train));
  train.device = Device::cuda;
  EXPECT_TRUE(uses_bf16(train));
}

TEST(ConfigParse, ListsCheckEveryItemWithItsIndex) {
  EXPECT_TRUE(parse_rejected("data: {split: [98, x]}\n", kWithData, "data.split[1]",
                             {"expected a number, got 'x'"}));
  EXPECT_TRUE(parse_rejected("parallel: {pipeline: 2, layers_per_stage: [1, 0.5]}\n", kWithData,
                             "parallel.layers_per_stage[1]", {"'0.5'"}));
  EXPECT_TRUE(parse_rejected("data: {split: 98}\n", kWithData, "data.split",
                             {"expected a list, got '98'"}));
}

TEST(ConfigParse, SectionsMustBeMaps) {
  EXPECT_TRUE(parse_rejected("model: 5\n", kWithData, "model", {"expected a map, got '5'"}));
  EXPECT_TRUE(
      parse_rejected("train: [1, 2]\n", kWithData, "train", {"expected a map, got a list"}));
  EXPECT_TRUE(
      parse_rejected("data: {path: {a: b}}\n", {}, "data.path", {"expected a string, got a map"}));
}

TEST(ConfigParse, TopLevelMustBeAMap) {
  EXPECT_TRUE(parse_rejected("- model\n- train\n", kWithData, "test.yaml",
                             {"top level must be a map", "got a list"}));
  EXPECT_TRUE(parse_rejected("just text\n", kWithData, "test.yaml", {"got 'just text'"}));
}

TEST(ConfigParse, MalformedYamlNamesSourceAndLineColumn) {
  // Line 3 is indented less than the map it continues: yaml-cpp stops at 3:2.
  EXPECT_TRUE(parse_rejected("model:\n  hidden_size: 64\n bad: 1\n", kWithData, "test.yaml",
                             {"3:2", "end of map not found"}));
  EXPECT_TRUE(parse_rejected("model: {num_layers: [}\n", kWithData, "test.yaml",
                             {"1:22", "illegal flow end"}));
  EXPECT_TRUE(parse_rejected("model: {}\n---\ntrain: {}\n", kWithData, "test.yaml",
                             {"one YAML document, got 2"}));
}

TEST(ConfigOverrides, ApplyTypedValuesAfterTheFile) {
  const Config config = parse_config(
      "train: {seed: 1}\nmodel: {activation: gelu_tanh}\n", "test.yaml",
      {"data.path=data/other", "train.seed=7", "model.activation=gelu", "data.split=[90,10]",
       "data.shuffle=true", "parallel.pipeline=2", "parallel.layers_per_stage=[1, 1]"});
  EXPECT_EQ(config.train.seed, 7u);
  EXPECT_EQ(config.model.activation, model::Activation::gelu);
  EXPECT_EQ(config.data.split, (std::vector<double>{90, 10}));
  EXPECT_TRUE(config.data.shuffle);
  EXPECT_EQ(config.data.path, "data/other");
  EXPECT_EQ(config.parallel.layers_per_stage, (std::vector<int64_t>{1, 1}));
}

TEST(ConfigOverrides, ApplyInOrderSplitAtTheFirstEquals) {
  const Config config = parse_config(
      "", "test.yaml", {"train.seed=7", "train.seed=9", "data.path=a=b", " output.dir = out "});
  EXPECT_EQ(config.train.seed, 9u);
  EXPECT_EQ(config.data.path, "a=b");
  EXPECT_EQ(config.output.dir, "out");
}

TEST(ConfigOverrides, SectionValueUpdatesOnlyTheGivenKeys) {
  const Config config =
      parse_config("model: {num_layers: 4, hidden_size: 32}\n", "test.yaml",
                   {"data.path=d", "model={hidden_size: 128, num_attention_heads: 4}"});
  EXPECT_EQ(config.model.num_layers, 4);
  EXPECT_EQ(config.model.hidden_size, 128);
  EXPECT_EQ(config.model.num_attention_heads, 4);
}

TEST(ConfigOverrides, UnknownPathIsNamed) {
  EXPECT_TRUE(parse_rejected("", {"data.path=d", "model.hiden_size=3"}, "model.hiden_size",
                             {"unknown key", "--set 'model.hiden_size=3'"}));
  EXPECT_TRUE(parse_rejected("", {"data.path=d", "trian.seed=3"}, "trian", {"unknown key"}));
  EXPECT_TRUE(parse_rejected("", {"data.path=d", "model.hidden_size.x=3"}, "model.hidden_size",
                             {"expected an integer, got a map"}));
}

TEST(ConfigOverrides, MalformedOverridesAreRejectedAsSet) {
  EXPECT_TRUE(parse_rejected("", {"train.seed"}, "--set", {"KEY=VALUE", "'train.seed'"}));
  EXPECT_TRUE(parse_rejected("", {"=7"}, "--set", {"empty key", "'=7'"}));
  EXPECT_TRUE(parse_rejected("", {"train..seed=7"}, "--set", {"empty key"}));
  EXPECT_TRUE(parse_rejected("", {"data.path=d", "data.split=[90,"}, "data.split",
                             {"invalid YAML", "--set 'data.split=[90,'"}));
  EXPECT_TRUE(parse_rejected("", {"data.path=d", "train.seed=abc"}, "train.seed",
                             {"expected a non-negative integer, got 'abc'"}));
}

TEST(ConfigOverrides, ResultIsValidated) {
  EXPECT_TRUE(parse_rejected("", {"data.path=d", "model.num_attention_heads=3"},
                             "model.hidden_size",
                             {"64 is not divisible by model.num_attention_heads 3"}));
}

TEST(ConfigToYaml, RoundTripsEveryFieldExactly) {
  Config pipelined = non_default_config();
  pipelined.parallel.layers_per_stage.clear();
  pipelined.parallel.virtual_pipeline = 2;  // 6 layers = 3 stages x 2 chunks
  Config awkward = non_default_config();
  awkward.optimizer.lr = std::nextafter(3e-4f, 1.f);
  awkward.model.init_method_std = 1.f / 3.f;
  awkward.model.layernorm_epsilon = std::numeric_limits<float>::denorm_min();
  awkward.data.split = {1.0 / 3.0, 2.0 / 3.0};
  awkward.data.path = "true";
  awkward.output.dir = "~";
  for (const Config& config : {non_default_config(), pipelined, awkward, valid_config()}) {
    const std::string yaml = to_yaml(config);
    SCOPED_TRACE(yaml);
    expect_same_config(parse_config(yaml, "to_yaml"), config);
    EXPECT_EQ(to_yaml(parse_config(yaml, "to_yaml")), yaml);
  }
}

TEST(ConfigToYaml, RoundTripsABlend) {
  Config blended = valid_config();
  blended.data.path.clear();
  blended.data.blend = {{.path = "data/web", .weight = 0.7},
                        {.path = "data/my code: v2", .weight = 1.0 / 3.0}};
  const std::string yaml = to_yaml(blended);
  SCOPED_TRACE(yaml);
  expect_same_config(parse_config(yaml, "to_yaml"), blended);
  EXPECT_EQ(to_yaml(parse_config(yaml, "to_yaml")), yaml);
  // Without a blend the key is written unset, and reads back unset.
  EXPECT_NE(to_yaml(valid_config()).find("  blend: ~\n"), std::string::npos);
}

// ---- data.blend: the list of maps and Megatron's flat list ----

TEST(ConfigBlend, ReadsTheListOfMaps) {
  const Config config = parse_config(
      "data:\n  blend:\n    - {path: data/web, weight: 0.7}\n    - {path: data/code, weight: "
      "0.3}\n",
      "t.yaml");
  EXPECT_EQ(config.data.blend, (std::vector<BlendEntry>{{.path = "data/web", .weight = 0.7},
                                                        {.path = "data/code", .weight = 0.3}}));
  EXPECT_TRUE(config.data.path.empty());
}

TEST(ConfigBlend, ReadsMegatronsFlatList) {
  const Config flat = parse_config("data: {blend: [0.7, data/web, 0.3, data/code]}\n", "t.yaml");
  EXPECT_EQ(flat.data.blend, (std::vector<BlendEntry>{{.path = "data/web", .weight = 0.7},
                                                      {.path = "data/code", .weight = 0.3}}));
  // As a --set override too, and a number-like path stays a path.
  const Config set = parse_config("", "t.yaml", {"data.blend=[1, 2024, 3, data/b]"});
  EXPECT_EQ(set.data.blend, (std::vector<BlendEntry>{{.path = "2024", .weight = 1},
                                                     {.path = "data/b", .weight = 3}}));
}

TEST(ConfigBlend, MalformedBlendsNameTheItem) {
  EXPECT_TRUE(parse_rejected("data: {blend: []}\n", {}, "data.blend", {"lists no dataset"}));
  EXPECT_TRUE(parse_rejected("data: {blend: data/web}\n", {}, "data.blend",
                             {"expected a list of {path, weight} maps", "'data/web'"}));
  EXPECT_TRUE(parse_rejected("data: {blend: [0.7, data/web, 0.3]}\n", {}, "data.blend",
                             {"needs pairs", "got 3 items"}));
  EXPECT_TRUE(
      parse_rejected("data: {blend: [data/web, 0.7]}\n", {}, "data.blend[0]",
                     {"weight of dataset 0", "[weight, path, weight, path, ...]", "'data/web'"}));
  EXPECT_TRUE(parse_rejected("data: {blend: [{path: a, weight: 1}, 0.5, b]}\n", {}, "data.blend[1]",
                             {"a {path, weight} map like item 0", "'0.5'"}));
  EXPECT_TRUE(parse_rejected("data: {blend: [0.5, [a]]}\n", {}, "data.blend[1]",
                             {"a weight or a path", "a list"}));
  EXPECT_TRUE(
      parse_rejected("data: {blend: [{path: a}]}\n", {}, "data.blend[0]", {"missing weight"}));
  EXPECT_TRUE(
      parse_rejected("data: {blend: [{weight: 1}]}\n", {}, "data.blend[0]", {"missing path"}));
  EXPECT_TRUE(parse_rejected("data: {blend: [{path: a, weight: 1, wieght: 2}]}\n", {},
                             "data.blend[0].wieght", {"unknown key", "path, weight"}));
  EXPECT_TRUE(parse_rejected("data: {blend: [{path: a, weight: heavy}]}\n", {},
                             "data.blend[0].weight", {"expected a number, got 'heavy'"}));
}

TEST(ConfigBlend, ValidationNamesBothFieldsAndTheBadWeight) {
  EXPECT_TRUE(parse_rejected("data: {path: data/web, blend: [1, data/code]}\n", {}, "data.path",
                             {"'data/web' and data.blend (1 dataset) are exclusive"}));
  // The flat list's weights are reported by dataset, as the map form's.
  EXPECT_TRUE(parse_rejected("data: {blend: [0.7, data/web, -0.3, data/code]}\n", {},
                             "data.blend[1].weight",
                             {"data.blend[1].weight: -0.3 must be > 0", "'data/code'"}));
  EXPECT_TRUE(parse_rejected("data: {blend: [{path: data/web, weight: -0.3}]}\n", {},
                             "data.blend[0].weight", {"-0.3 must be > 0"}));
  // null unsets a blend, so an override can switch a blended config back to one path, and
  // null unsets a path, so an override can switch a config to a blend.
  const Config back = parse_config("data: {blend: [1, data/web]}\n", "t.yaml",
                                   {"data.blend=~", "data.path=data/one"});
  EXPECT_TRUE(back.data.blend.empty());
  EXPECT_EQ(back.data.path, "data/one");
  const Config there = parse_config("data: {path: data/one}\n", "t.yaml",
                                    {"data.path=~", "data.blend=[1, data/web]"});
  EXPECT_TRUE(there.data.path.empty());
  EXPECT_EQ(there.data.blend, (std::vector<BlendEntry>{{.path = "data/web", .weight = 1}}));
}

TEST(ConfigToYaml, WritesEveryKeyWithEnumNames) {
  const std::string yaml = to_yaml(valid_config());
  for (const char* line :
       {"  activation: gelu_tanh\n", "  device: cpu\n", "  precision: fp32\n",
        "  lr_decay_style: cosine\n", "  backend: auto\n", "  export: true\n", "  split: [98, 2]\n",
        "  layers_per_stage: []\n", "  layernorm_epsilon: 1e-05\n", "  seed: 1234\n"}) {
    EXPECT_NE(yaml.find(line), std::string::npos) << line << " not in:\n" << yaml;
  }
}

TEST(ConfigLoad, ReadsAFileAndNamesItInErrors) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("config_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.yaml").string();
  const std::string bad = (dir / "bad.yaml").string();
  std::ofstream(good) << "data: {path: d}\ntrain: {steps: 3}\n";
  std::ofstream(bad) << "train: {steps: 3\n";
  EXPECT_EQ(load_config(good, {"train.seed=5"}).train.steps, 3);
  EXPECT_EQ(load_config(good, {"train.seed=5"}).train.seed, 5u);
  EXPECT_TRUE(throws_config_error([&] { load_config(bad); }, bad, {"invalid YAML at 2:1"}));
  const std::string missing = (dir / "missing.yaml").string();
  EXPECT_TRUE(throws_config_error([&] { load_config(missing); }, missing, {"cannot open"}));
  EXPECT_TRUE(
      throws_config_error([&] { load_config(dir.string()); }, dir.string(), {"is a directory"}));
  std::filesystem::remove_all(dir);
}

// Every config the repository ships reads and validates as a plan reads it (their data need not
// exist here).
TEST(ConfigParse, EveryBundledConfigIsValid) {
  int64_t configs = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TRAINER_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_config(entry.path().string(), {}, ConfigUse::plan));
    ++configs;
  }
  EXPECT_GE(configs, 10);
}

}  // namespace
}  // namespace trainer::config_test
