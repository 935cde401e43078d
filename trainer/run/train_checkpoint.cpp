// The trainer's state in and out of checkpoints (trainer/checkpoint/checkpoint.h) and the
// start from Hugging Face weights. Rules: a checkpoint holds the fp32 weights and
// both AdamW moments of every parameter under its global name, the word
// embeddings without vocabulary padding (padding depends on the tp size), so
// any layout resumes any other; dropout and data order are keyed by (seed,
// step), so the step restores them, with the skipped batches (meta.extra) that map steps to
// batches. The guard's loss window and rewind count travel in meta.extra too.
#include <algorithm>
#include <charconv>
#include <memory>
#include <ostream>
#include <utility>

#include "runtime/ops.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/stored_params.h"
#include "trainer/config/fields.h"
#include "trainer/export/hf_export.h"
#include "trainer/run/train.h"
#include "trainer/util/format_bytes.h"

namespace trainer {
namespace {

// meta.extra keys.
const char* const kSkippedBatchesKey = "skipped_batches";
const char* const kGuardLossesKey = "guard_losses";
const char* const kRewindsKey = "rewinds";

// meta.extra[key], or "" when the checkpoint predates it.
std::string extra(const CheckpointMeta& meta, const char* key) {
  const auto found = meta.extra.find(key);
  return found == meta.extra.end() ? std::string() : found->second;
}

// The model fields a checkpoint must agree on.
std::string model_mismatch(const model::GptConfig& a, const model::GptConfig& b) {
  std::string out;
  auto check = [&](const char* name, int64_t x, int64_t y) {
    if (x != y)
      out += TRAINER_STR("model." << name << " " << x << " in the checkpoint, " << y << " now; ");
  };
  check("num_layers", a.num_layers, b.num_layers);
  check("hidden_size", a.hidden_size, b.hidden_size);
  check("num_attention_heads", a.num_attention_heads, b.num_attention_heads);
  check("ffn_hidden_size", a.ffn(), b.ffn());
  check("vocab_size", a.vocab_size, b.vocab_size);
  check("max_position_embeddings", a.positions(), b.positions());
  check("num_query_groups", a.query_groups(), b.query_groups());
  check("kv_channels", a.head_dim(), b.head_dim());
  auto check_flag = [&](const char* name, auto x, auto y, const char* x_text, const char* y_text) {
    if (x != y)
      out += TRAINER_STR("model." << name << " " << x_text << " in the checkpoint, " << y_text
                                  << " now; ");
  };
  auto names = [](auto value) { return std::string(config_detail::enum_name(value)); };
  check_flag("architecture", a.architecture, b.architecture, names(a.architecture).c_str(),
             names(b.architecture).c_str());
  check_flag("normalization", a.normalization, b.normalization, names(a.normalization).c_str(),
             names(b.normalization).c_str());
  check_flag("activation", a.activation, b.activation, names(a.activation).c_str(),
             names(b.activation).c_str());
  check_flag("position_embedding", a.position_embedding, b.position_embedding,
             names(a.position_embedding).c_str(), names(b.position_embedding).c_str());
  check_flag("add_bias_linear", a.add_bias_linear, b.add_bias_linear,
             a.add_bias_linear ? "true" : "false", b.add_bias_linear ? "true" : "false");
  check_flag("add_qkv_bias", a.add_qkv_bias, b.add_qkv_bias, a.add_qkv_bias ? "true" : "false",
             b.add_qkv_bias ? "true" : "false");
  check_flag("qk_layernorm", a.qk_layernorm, b.qk_layernorm, a.qk_layernorm ? "true" : "false",
             b.qk_layernorm ? "true" : "false");
  check_flag("untie_embeddings", a.untie_embeddings, b.untie_embeddings,
             a.untie_embeddings ? "true" : "false", b.untie_embeddings ? "true" : "false");
  return out;
}

}  // namespace

void Trainer::save_checkpoint() {
  finish_checkpoints();  // one save in flight at a time
  const bool async = config_.checkpoint.async;
  // Async saves write from a snapshot (workspace memory) so training can go on;
  // device state is always written from a host snapshot.
  const bool snapshotted = async || on_device_;
  const int64_t n = state_.params.flat.numel();
  const OptimizerState full = state_.optimizer->full_state(*groups_.dp, allocator_);
  const runtime::Tensor live[] = {full.master, full.exp_avg, full.exp_avg_sq};
  runtime::Tensor snapshot;
  if (snapshotted) {
    snapshot = runtime::Tensor::empty(on_device_ ? host_allocator_ : allocator_, {3 * n},
                                      runtime::DType::f32, runtime::MemoryCategory::workspace);
  }
  const float* state[3];
  for (int i = 0; i < 3; ++i) {
    if (snapshotted) runtime::ops::download(snapshot.view(i * n, {n}), live[i].reshape({n}));
    state[i] = snapshotted ? snapshot.f32() + i * n : live[i].f32();
  }
  std::vector<TensorShard> shards;
  int64_t offset = 0;  // named tensors tile the flat buffer in order
  for (const model::NamedParam& p : state_.params.named) {
    const StoredPart part = stored_part(p, config_.model);
    const int64_t begin = std::exchange(offset, offset + p.tensor.numel());
    if (part.elements == 0) continue;
    for (int i = 0; i < 3; ++i) {
      shards.push_back({kStateNames[i] + p.name, part.global_shape, part.slice, runtime::DType::f32,
                        state[i] + begin});
    }
  }
  CheckpointMeta meta;
  meta.step = step_;
  meta.consumed_samples = step_ * config_.train.global_batch_size;
  meta.seed = config_.train.seed;
  meta.config_yaml = to_yaml(config_);
  meta.tensor = config_.parallel.tensor;
  meta.pipeline = config_.parallel.pipeline;
  meta.data = config_.parallel.data;
  meta.context = config_.parallel.context;
  meta.extra[kSkippedBatchesKey] = skipped_.to_text();
  meta.extra[kGuardLossesKey] = guard_.to_text();
  meta.extra[kRewindsKey] = std::to_string(rewinds_);
  // dp x cp replicas hold the same shards
  const bool writes = groups_.coordinates.dp == 0 && groups_.coordinates.cp == 0;
  if (!writes) shards.clear();
  const int keep_last = static_cast<int>(config_.checkpoint.keep_last);
  try {
    if (async) {
      pending_save_ = std::make_unique<AsyncCheckpointSave>(config_.checkpoint.dir, meta,
                                                            std::move(snapshot), std::move(shards),
                                                            writes, keep_last, *groups_.world);
      return;
    }
    trainer::save_checkpoint(config_.checkpoint.dir, meta, shards, writes, keep_last,
                             *groups_.world);
  } catch (const std::exception& error) {
    record_event(Event("checkpoint", step_)
                     .with("status", "failed")
                     .with("dir", config_.checkpoint.dir)
                     .with("error", error.what()));
    throw;
  }
  checkpoint_written(step_, false);
}

void Trainer::finish_checkpoints() {
  if (!pending_save_) return;
  const int64_t step = pending_save_->step();
  try {
    pending_save_->wait(*groups_.world);
  } catch (const std::exception& error) {
    pending_save_.reset();
    record_event(Event("checkpoint", step)
                     .with("status", "failed")
                     .with("dir", config_.checkpoint.dir)
                     .with("error", error.what()));
    throw;
  }
  pending_save_.reset();
  checkpoint_written(step, true);
}

void Trainer::checkpoint_written(int64_t step, bool async) {
  last_checkpoint_step_ = step;
  record_event(Event("checkpoint", step)
                   .with("status", "written")
                   .with("dir", config_.checkpoint.dir)
                   .with("async", async)
                   .with("at_step", step_));
  if (groups_.is_logging_rank()) {
    log_ << "checkpoint: step " << step << " written to " << config_.checkpoint.dir
         << (async ? " (async)\n" : "\n");
    log_.flush();
  }
}

bool Trainer::resume(const std::string& which) {
  if (config_.checkpoint.dir.empty() && which == "auto") {
    throw runtime::ConfigError("checkpoint.dir", "--resume auto needs checkpoint.dir");
  }
  const std::optional<std::string> step_dir = find_checkpoint(config_.checkpoint.dir, which);
  if (!step_dir) {
    if (groups_.is_logging_rank())
      log_ << "resume: no checkpoint in " << config_.checkpoint.dir << " yet, starting fresh\n";
    return false;
  }
  const CheckpointReader reader(*step_dir, ChecksumPolicy::verify_on_first_read);
  const CheckpointMeta& meta = reader.meta();
  const Config saved = parse_config(meta.config_yaml, *step_dir + "/manifest.json (config)");
  const std::string mismatch = model_mismatch(saved.model, config_.model);
  if (!mismatch.empty()) {
    throw runtime::InputError("checkpoint " + *step_dir + " does not fit this model: " + mismatch);
  }
  if (meta.step > config_.train.steps) {
    throw runtime::InputError(TRAINER_STR("checkpoint " << *step_dir << " is at step " << meta.step
                                                        << ", beyond train.steps "
                                                        << config_.train.steps));
  }
  load_checkpoint_state(reader, *step_dir);
  resumed_step_ = meta.step;
  resume_event_ = Event("resume", meta.step)
                      .with("checkpoint", *step_dir)
                      .with("tensor", meta.tensor)
                      .with("pipeline", meta.pipeline)
                      .with("data", meta.data)
                      .with("context", meta.context)
                      .with("skipped_batches", skipped_.to_text())
                      .with("rewinds", rewinds_);

  if (groups_.is_logging_rank()) {
    log_ << "resume: step " << meta.step << " from " << *step_dir << " (written by tensor "
         << meta.tensor << " x context " << meta.context << " x pipeline " << meta.pipeline
         << " x data " << meta.data << ")";
    if (saved.train.seed != config_.train.seed ||
        saved.train.global_batch_size != config_.train.global_batch_size) {
      log_ << "; note: train.seed or train.global_batch_size changed, so the data order and "
              "dropout differ from an uninterrupted run";
    }
    log_ << "\n";
    log_.flush();
  }
  return true;
}

void Trainer::load_checkpoint_state(const CheckpointReader& reader, const std::string& step_dir) {
  const CheckpointMeta& meta = reader.meta();
  // Read into host memory (the state itself, or a staging copy for a device).
  const int64_t n = state_.params.flat.numel();
  const OptimizerState full = state_.optimizer->full_state(*groups_.dp, allocator_);
  const runtime::Tensor live[] = {full.master, full.exp_avg, full.exp_avg_sq};
  runtime::Tensor staging;
  if (on_device_) {
    staging = runtime::Tensor::empty(host_allocator_, {3 * n}, runtime::DType::f32,
                                     runtime::MemoryCategory::workspace);
  }
  float* state[3];
  for (int i = 0; i < 3; ++i) state[i] = on_device_ ? staging.f32() + i * n : live[i].f32();
  int64_t offset = 0;  // named tensors tile the flat buffer in order
  for (const model::NamedParam& p : state_.params.named) {
    const StoredPart part = stored_part(p, config_.model);
    for (int i = 0; i < 3; ++i) {
      std::fill(state[i] + offset, state[i] + offset + p.tensor.numel(), 0.f);  // padding rows
      if (part.elements > 0) {
        reader.read(kStateNames[i] + p.name, part.global_shape, part.slice, runtime::DType::f32,
                    state[i] + offset);
      }
    }
    offset += p.tensor.numel();
  }
  if (on_device_) {
    for (int i = 0; i < 3; ++i)
      runtime::ops::upload(live[i].reshape({n}), staging.view(i * n, {n}));
  }
  state_.optimizer->load_full_state(full);  // and the compute weights from the master weights
  step_ = meta.step;
  last_checkpoint_step_ = meta.step;
  const std::string source = step_dir + "/manifest.json (extra)";
  // This run's data.skip_batches and the checkpoint's (which holds its rewinds' windows).
  const SkippedBatches stored = SkippedBatches::parse(extra(meta, kSkippedBatchesKey), source);
  skipped_ = SkippedBatches(config_.data.skip_batches);
  for (const BatchRange& range : stored.ranges()) skipped_.add(range);
  guard_.assign_text(extra(meta, kGuardLossesKey), source);
  const std::string rewinds = extra(meta, kRewindsKey);
  rewinds_ = 0;
  if (!rewinds.empty() &&
      std::from_chars(rewinds.data(), rewinds.data() + rewinds.size(), rewinds_).ptr !=
          rewinds.data() + rewinds.size()) {
    throw runtime::InputError(source + ": malformed rewinds '" + rewinds + "'");
  }
}

int64_t Trainer::init_from(const std::string& path) {
  // The file is checked against the whole model in this run's padding from its headers, then
  // each rank reads the tensors of the parameters it holds, one at a time, and of a split one
  // only the rows or the columns it holds.
  const model::GptConfig padded = whole_model_config();
  const std::unique_ptr<HfImport> import = open_hf_import(path, padded);
  const model::GptParams& target = on_device_ ? host_params_ : state_.master;
  for (const model::NamedParam& p : target.named) {
    HfBlock block;
    if (p.shard_dim == 0) block = {.first_row = p.shard_offset, .rows = p.tensor.dim(0)};
    if (p.shard_dim == 1) block = {.first_col = p.shard_offset, .cols = p.tensor.dim(1)};
    import->read_into(p.name, block, {p.tensor.f32(), static_cast<size_t>(p.tensor.numel())});
  }
  const OptimizerState full = state_.optimizer->full_state(*groups_.dp, allocator_);
  if (on_device_) runtime::ops::upload(full.master, host_params_.flat);
  state_.optimizer->load_full_state(full);  // and the compute weights from the master weights
  if (groups_.is_logging_rank()) {
    log_ << "init_from: weights of " << path << " (this rank read "
         << format_bytes(import->bytes_read()) << " of " << format_bytes(import->stored_bytes())
         << ")\n";
  }
  return import->bytes_read();
}

}  // namespace trainer
