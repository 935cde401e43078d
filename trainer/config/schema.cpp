// The YAML schema of the run config: one table per section, key names = struct
// field names, in the order to_yaml writes them. A new section is a struct with a
// ConfigSchema specialization here plus one `field(...)` line in ConfigSchema<Config>.
#include "model/recompute_modules.h"
#include "trainer/config/fields.h"

namespace trainer::config_detail {

// ---- recompute: enums, the module list, presets and overrides ----
template <>
struct EnumNames<model::RecomputeMode> {
  static constexpr std::array<std::pair<std::string_view, model::RecomputeMode>, 3> entries{
      {{"none", model::RecomputeMode::none},
       {"full", model::RecomputeMode::full},
       {"selective", model::RecomputeMode::selective}}};
};
template <>
struct EnumNames<recompute::Method> {
  static constexpr std::array<std::pair<std::string_view, recompute::Method>, 2> entries{
      {{"uniform", recompute::Method::uniform}, {"block", recompute::Method::block}}};
};

// `modules: [core_attn, act]`: a list of distinct module names, spelled as the module table
// (model/recompute_modules.h) names them.
template <>
struct ValueCodec<model::SelectiveModules> {
  static void read(const YAML::Node& node, const std::string& path,
                   model::SelectiveModules& value) {
    std::vector<std::string> names;
    read_value(node, path, names);
    value = {};
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string item_path = path + "[" + std::to_string(i) + "]";
      bool known = false;
      for (const model::SelectiveModuleRow& row : model::selective_module_table()) {
        if (names[i] != row.name) continue;
        if (value.*row.flag)
          throw runtime::ConfigError(item_path, "module '" + names[i] + "' listed twice");
        value.*row.flag = known = true;
      }
      if (!known) {
        std::string all;
        for (const model::SelectiveModuleRow& row : model::selective_module_table())
          all += (all.empty() ? "" : ", ") + std::string(row.name);
        throw runtime::ConfigError(item_path,
                                   "unknown module '" + names[i] + "' (known: " + all + ")");
      }
    }
  }
  static void write(YAML::Emitter& out, const model::SelectiveModules& value) {
    out << YAML::Flow << YAML::BeginSeq;
    for (const model::SelectiveModuleRow& row : model::selective_module_table())
      if (value.*row.flag) out << std::string(row.name);
    out << YAML::EndSeq;
  }
};

// `[first, last]`: a range of global batches (data.skip_batches).
template <>
struct ValueCodec<BatchRange> {
  static void read(const YAML::Node& node, const std::string& path, BatchRange& value) {
    std::vector<int64_t> range;
    read_value(node, path, range);
    if (range.size() != 2)
      throw runtime::ConfigError(path, "expected [first, last], got " + describe(node));
    value = {.first = range[0], .last = range[1]};
  }
  static void write(YAML::Emitter& out, const BatchRange& value) {
    write_value(out, std::vector<int64_t>{value.first, value.last});
  }
};

template <class Owner>
std::vector<FieldSpec<Owner>> preset_fields() {
  using recompute::RecomputePreset;
  return {field("granularity", &Owner::preset, &RecomputePreset::granularity),
          field("method", &Owner::preset, &RecomputePreset::method),
          field("num_layers", &Owner::preset, &RecomputePreset::num_layers),
          field("modules", &Owner::preset, &RecomputePreset::modules)};
}

template <>
struct ConfigSchema<recompute::LayerOverride> {
  static const std::vector<FieldSpec<recompute::LayerOverride>>& fields() {
    using recompute::LayerOverride;
    static const std::vector<FieldSpec<LayerOverride>> table = [] {
      std::vector<FieldSpec<LayerOverride>> t;
      t.push_back({"range",
                   [](const YAML::Node& node, const std::string& path, LayerOverride& o) {
                     std::vector<int64_t> range;
                     read_value(node, path, range);
                     if (range.size() != 2) {
                       throw runtime::ConfigError(path,
                                                  "expected [first, last], got " + describe(node));
                     }
                     o.first = range[0], o.last = range[1];
                   },
                   [](YAML::Emitter& out, const LayerOverride& o) {
                     write_value(out, std::vector<int64_t>{o.first, o.last});
                   }});
      for (auto& f : preset_fields<LayerOverride>()) t.push_back(std::move(f));
      return t;
    }();
    return table;
  }
};

template <>
struct ConfigSchema<recompute::StageOverride> {
  static const std::vector<FieldSpec<recompute::StageOverride>>& fields() {
    using recompute::StageOverride;
    static const std::vector<FieldSpec<StageOverride>> table = [] {
      std::vector<FieldSpec<StageOverride>> t = {field("stage", &StageOverride::stage)};
      for (auto& f : preset_fields<StageOverride>()) t.push_back(std::move(f));
      return t;
    }();
    return table;
  }
};

template <>
struct ConfigSchema<recompute::RecomputeConfig> {
  static const std::vector<FieldSpec<recompute::RecomputeConfig>>& fields() {
    using recompute::RecomputeConfig;
    static const std::vector<FieldSpec<RecomputeConfig>> table = [] {
      std::vector<FieldSpec<RecomputeConfig>> t = preset_fields<RecomputeConfig>();
      t.push_back(field("layers", &RecomputeConfig::layers));
      t.push_back(field("stages", &RecomputeConfig::stages));
      t.push_back(field("auto", &RecomputeConfig::automatic));
      return t;
    }();
    return table;
  }
};

template <>
struct ConfigSchema<runtime::RopeScaling> {
  static const std::vector<FieldSpec<runtime::RopeScaling>>& fields() {
    static const std::vector<FieldSpec<runtime::RopeScaling>> table = {
        field("type", &runtime::RopeScaling::type),
        field("factor", &runtime::RopeScaling::factor),
        field("low_freq_factor", &runtime::RopeScaling::low_freq_factor),
        field("high_freq_factor", &runtime::RopeScaling::high_freq_factor),
        field("original_max_position_embeddings",
              &runtime::RopeScaling::original_max_position_embeddings),
        field("beta_fast", &runtime::RopeScaling::beta_fast),
        field("beta_slow", &runtime::RopeScaling::beta_slow),
    };
    return table;
  }
};

template <>
struct ConfigSchema<model::GptConfig> {
  static const std::vector<FieldSpec<model::GptConfig>>& fields() {
    using model::GptConfig;
    static const std::vector<FieldSpec<GptConfig>> table = {
        field("architecture", &GptConfig::architecture),
        field("num_layers", &GptConfig::num_layers),
        field("hidden_size", &GptConfig::hidden_size),
        field("num_attention_heads", &GptConfig::num_attention_heads),
        field("num_query_groups", &GptConfig::num_query_groups),
        field("ffn_hidden_size", &GptConfig::ffn_hidden_size),
        field("seq_length", &GptConfig::seq_length),
        field("max_position_embeddings", &GptConfig::max_position_embeddings),
        field("vocab_size", &GptConfig::vocab_size),
        field("make_vocab_size_divisible_by", &GptConfig::make_vocab_size_divisible_by),
        field("hidden_dropout", &GptConfig::hidden_dropout),
        field("attention_dropout", &GptConfig::attention_dropout),
        field("init_method_std", &GptConfig::init_method_std),
        field("layernorm_epsilon", &GptConfig::layernorm_epsilon),
        field("normalization", &GptConfig::normalization),
        field("activation", &GptConfig::activation),
        field("position_embedding", &GptConfig::position_embedding),
        field("rotary_base", &GptConfig::rotary_base),
        field("rope_scaling", &GptConfig::rope_scaling),
        field("add_bias_linear", &GptConfig::add_bias_linear),
        field("add_qkv_bias", &GptConfig::add_qkv_bias),
        field("qk_layernorm", &GptConfig::qk_layernorm),
        field("kv_channels", &GptConfig::kv_channels),
        field("sliding_window", &GptConfig::sliding_window),
        field("untie_embeddings", &GptConfig::untie_embeddings),
        field("attention_backend", &GptConfig::attention_backend),
    };
    return table;
  }
};

template <>
struct ConfigSchema<GuardConfig> {
  static const std::vector<FieldSpec<GuardConfig>>& fields() {
    static const std::vector<FieldSpec<GuardConfig>> table = {
        field("action", &GuardConfig::action),
        field("loss_spike_factor", &GuardConfig::loss_spike_factor),
        field("window", &GuardConfig::window),
        field("max_rewinds", &GuardConfig::max_rewinds),
    };
    return table;
  }
};

template <>
struct ConfigSchema<InjectConfig> {
  static const std::vector<FieldSpec<InjectConfig>>& fields() {
    static const std::vector<FieldSpec<InjectConfig>> table = {
        field("step", &InjectConfig::step),
        field("scale_loss", &InjectConfig::scale_loss),
    };
    return table;
  }
};

template <>
struct ConfigSchema<TraceConfig> {
  static const std::vector<FieldSpec<TraceConfig>>& fields() {
    static const std::vector<FieldSpec<TraceConfig>> table = {
        field("start_step", &TraceConfig::start_step),
        field("steps", &TraceConfig::steps),
    };
    return table;
  }
};

template <>
struct ConfigSchema<TrainConfig> {
  static const std::vector<FieldSpec<TrainConfig>>& fields() {
    static const std::vector<FieldSpec<TrainConfig>> table = {
        field("steps", &TrainConfig::steps),
        field("micro_batch_size", &TrainConfig::micro_batch_size),
        field("global_batch_size", &TrainConfig::global_batch_size),
        field("seed", &TrainConfig::seed),
        field("log_interval", &TrainConfig::log_interval),
        field("eval_interval", &TrainConfig::eval_interval),
        field("eval_iters", &TrainConfig::eval_iters),
        field("sample_interval", &TrainConfig::sample_interval),
        field("sample_prompt", &TrainConfig::sample_prompt),
        field("sample_tokens", &TrainConfig::sample_tokens),
        field("exit_duration_minutes", &TrainConfig::exit_duration_minutes),
        field("device", &TrainConfig::device),
        field("precision", &TrainConfig::precision),
        field("peak_tflops", &TrainConfig::peak_tflops),
        field("on_nonfinite", &TrainConfig::on_nonfinite),
        field("max_skipped_steps", &TrainConfig::max_skipped_steps),
        field("init_from", &TrainConfig::init_from),
        field("guard", &TrainConfig::guard),
        field("inject", &TrainConfig::inject),
        field("trace", &TrainConfig::trace),
        field("memory_timeline_step", &TrainConfig::memory_timeline_step),
        field("memory_budget_gib", &TrainConfig::memory_budget_gib),
        field("plan_objective", &TrainConfig::plan_objective),
        field("time_profile", &TrainConfig::time_profile),
    };
    return table;
  }
};

template <>
struct ConfigSchema<OptimizerConfig> {
  static const std::vector<FieldSpec<OptimizerConfig>>& fields() {
    static const std::vector<FieldSpec<OptimizerConfig>> table = {
        field("lr", &OptimizerConfig::lr),
        field("min_lr", &OptimizerConfig::min_lr),
        field("weight_decay", &OptimizerConfig::weight_decay),
        field("adam_beta1", &OptimizerConfig::adam_beta1),
        field("adam_beta2", &OptimizerConfig::adam_beta2),
        field("adam_eps", &OptimizerConfig::adam_eps),
        field("clip_grad", &OptimizerConfig::clip_grad),
        field("lr_warmup_steps", &OptimizerConfig::lr_warmup_steps),
        field("lr_decay_steps", &OptimizerConfig::lr_decay_steps),
        field("lr_decay_style", &OptimizerConfig::lr_decay_style),
        field("lr_wsd_decay_steps", &OptimizerConfig::lr_wsd_decay_steps),
        field("lr_wsd_decay_style", &OptimizerConfig::lr_wsd_decay_style),
        field("distributed", &OptimizerConfig::distributed),
        field("bucket_mb", &OptimizerConfig::bucket_mb),
        field("overlap_grad_reduce", &OptimizerConfig::overlap_grad_reduce),
    };
    return table;
  }
};

template <>
struct ConfigSchema<BlendEntry> {
  static const std::vector<FieldSpec<BlendEntry>>& fields() {
    static const std::vector<FieldSpec<BlendEntry>> table = {
        field("path", &BlendEntry::path),
        field("weight", &BlendEntry::weight),
    };
    return table;
  }
};

namespace {

// data.blend in either spelling: a list of {path, weight} maps (each key required), or
// Megatron's flat list [weight, path, weight, path, ...]. null unsets it; an empty list is an
// error. Weights are checked by validate_config (data.blend[i].weight, i counting datasets).
std::vector<BlendEntry> read_blend(const YAML::Node& node, const std::string& path) {
  if (node.IsNull()) return {};
  if (!node.IsSequence()) {
    throw runtime::ConfigError(path,
                               "expected a list of {path, weight} maps or the flat list "
                               "[weight, path, weight, path, ...], got " +
                                   describe(node));
  }
  if (node.size() == 0) {
    throw runtime::ConfigError(path, "lists no dataset; give at least one {path, weight}");
  }
  const bool maps = node[0].IsMap();
  auto item_path = [&](size_t i) { return path + "[" + std::to_string(i) + "]"; };
  for (size_t i = 0; i < node.size(); ++i) {
    if (node[i].IsMap() != maps || (!maps && !node[i].IsScalar())) {
      throw runtime::ConfigError(
          item_path(i), std::string("expected ") +
                            (maps ? "a {path, weight} map like item 0" : "a weight or a path") +
                            " (one spelling per list), got " + describe(node[i]));
    }
  }
  std::vector<BlendEntry> blend;
  if (maps) {
    for (size_t i = 0; i < node.size(); ++i) {
      for (const char* key : {"path", "weight"}) {
        if (!node[i][key]) throw runtime::ConfigError(item_path(i), std::string("missing ") + key);
      }
      BlendEntry entry;
      read_value(node[i], item_path(i), entry);
      blend.push_back(entry);
    }
    return blend;
  }
  if (node.size() % 2 != 0) {
    throw runtime::ConfigError(path, "the flat list [weight, path, ...] needs pairs, got " +
                                         std::to_string(node.size()) + " items");
  }
  for (size_t i = 0; i < node.size(); i += 2) {
    BlendEntry entry;
    try {
      read_value(node[i], item_path(i), entry.weight);
    } catch (const runtime::ConfigError&) {
      throw runtime::ConfigError(item_path(i), "expected the weight of dataset " +
                                                   std::to_string(i / 2) +
                                                   " (the flat list is "
                                                   "[weight, path, weight, path, ...]), got " +
                                                   describe(node[i]));
    }
    read_value(node[i + 1], item_path(i + 1), entry.path);
    blend.push_back(entry);
  }
  return blend;
}

}  // namespace

template <>
struct ConfigSchema<DataConfig> {
  static const std::vector<FieldSpec<DataConfig>>& fields() {
    static const std::vector<FieldSpec<DataConfig>> table = {
        {"path",  // null (~) unsets it, so an override can switch a config to data.blend
         [](const YAML::Node& node, const std::string& path, DataConfig& data) {
           if (node.IsNull()) {
             data.path.clear();
           } else {
             read_value(node, path, data.path);
           }
         },
         [](YAML::Emitter& out, const DataConfig& data) { write_value(out, data.path); }},
        {"blend",
         [](const YAML::Node& node, const std::string& path, DataConfig& data) {
           data.blend = read_blend(node, path);
         },
         [](YAML::Emitter& out, const DataConfig& data) {
           if (data.blend.empty()) {
             out << YAML::Null;  // unset (an empty list reads as an error)
           } else {
             write_value(out, data.blend);
           }
         }},
        field("split", &DataConfig::split),
        field("shuffle", &DataConfig::shuffle),
        field("skip_batches", &DataConfig::skip_batches),
        field("eod_mask_loss", &DataConfig::eod_mask_loss),
        field("reset_attention_mask", &DataConfig::reset_attention_mask),
        field("reset_position_ids", &DataConfig::reset_position_ids),
        field("eod_id", &DataConfig::eod_id),
    };
    return table;
  }
};

template <>
struct ConfigSchema<parallel::ParallelConfig> {
  static const std::vector<FieldSpec<parallel::ParallelConfig>>& fields() {
    using parallel::ParallelConfig;
    static const std::vector<FieldSpec<ParallelConfig>> table = {
        field("tensor", &ParallelConfig::tensor),
        field("pipeline", &ParallelConfig::pipeline),
        field("data", &ParallelConfig::data),
        field("context", &ParallelConfig::context),
        field("virtual_pipeline", &ParallelConfig::virtual_pipeline),
        field("sequence_parallel", &ParallelConfig::sequence_parallel),
        field("layers_per_stage", &ParallelConfig::layers_per_stage),
        field("backend", &ParallelConfig::backend),
    };
    return table;
  }
};

template <>
struct ConfigSchema<CheckpointConfig> {
  static const std::vector<FieldSpec<CheckpointConfig>>& fields() {
    static const std::vector<FieldSpec<CheckpointConfig>> table = {
        field("dir", &CheckpointConfig::dir),
        field("interval", &CheckpointConfig::interval),
        field("keep_last", &CheckpointConfig::keep_last),
        field("async", &CheckpointConfig::async),
    };
    return table;
  }
};

template <>
struct ConfigSchema<OutputConfig> {
  static const std::vector<FieldSpec<OutputConfig>>& fields() {
    static const std::vector<FieldSpec<OutputConfig>> table = {
        field("dir", &OutputConfig::dir),
        field("export", &OutputConfig::export_model),
        field("export_dtype", &OutputConfig::export_dtype),
        field("tensorboard", &OutputConfig::tensorboard),
    };
    return table;
  }
};

template <>
struct ConfigSchema<LossTarget> {
  static const std::vector<FieldSpec<LossTarget>>& fields() {
    static const std::vector<FieldSpec<LossTarget>> table = {
        field("at_step", &LossTarget::at_step),
        field("value", &LossTarget::value),
    };
    return table;
  }
};

template <>
struct ConfigSchema<TargetsConfig> {
  static const std::vector<FieldSpec<TargetsConfig>>& fields() {
    static const std::vector<FieldSpec<TargetsConfig>> table = {
        field("min_tokens_per_s", &TargetsConfig::min_tokens_per_s),
        field("max_memory_gib", &TargetsConfig::max_memory_gib),
        field("max_loss", &TargetsConfig::max_loss),
        field("window", &TargetsConfig::window),
        field("action", &TargetsConfig::action),
        field("throughput_drift_fraction", &TargetsConfig::throughput_drift_fraction),
    };
    return table;
  }
};

template <>
struct ConfigSchema<Config> {
  static const std::vector<FieldSpec<Config>>& fields() {
    static const std::vector<FieldSpec<Config>> table = {
        field("model", &Config::model),           field("train", &Config::train),
        field("optimizer", &Config::optimizer),   field("data", &Config::data),
        field("parallel", &Config::parallel),     field("recompute", &Config::recompute),
        field("checkpoint", &Config::checkpoint), field("output", &Config::output),
        field("targets", &Config::targets),
    };
    return table;
  }
};

void read_config(const YAML::Node& root, Config& config) {
  read_value(root, "", config);
}

void write_config(YAML::Emitter& out, const Config& config) {
  write_value(out, config);
}

void write_recompute(YAML::Emitter& out, const recompute::RecomputeConfig& recompute) {
  out << YAML::BeginMap << YAML::Key << "recompute" << YAML::Value;
  write_value(out, recompute);
  out << YAML::EndMap;
}

void write_model(YAML::Emitter& out, const model::GptConfig& model) {
  out << YAML::BeginMap << YAML::Key << "model" << YAML::Value;
  write_value(out, model);
  out << YAML::EndMap;
}

}  // namespace trainer::config_detail
