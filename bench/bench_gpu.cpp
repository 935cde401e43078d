// GPU benchmark of the trainer itself: a GPT 1.3B-class model in bf16 on one device under the
// recompute presets none, selective core_attn and full uniform 1. Each configuration is one
// trainer::Trainer, built, stepped and destroyed before the next, on one CudaContext and one
// CudaAllocator whose cache is released in between. Numbers are measured, never asserted.
//
// usage: bench_gpu OUT_JSON [--budget-gib 80] [--warmup 2] [--steps 3] [--sweep-warmup 1]
//                  [--sweep-steps 1] [--peak-tflops 989.4] [--table-only] [--quick]
//   throughput table: seq 2048, micro batch 4, global batch 8; per preset tokens/s, model and
//     hardware TFLOP/s, MFU and HFU against --peak-tflops (train.peak_tflops), peak bytes per
//     category and live at once, peak reserved bytes, predicted and measured activation peak;
//     then each preset's throughput against `none`, and the targets (MFU >= 40% without recompute,
//     full >= 0.72x none, selective core_attn >= 0.95x none) with their measured values.
//   sequence sweep: micro batch 1, seq 2048 to 32768, per preset until the first length whose
//     peak of live allocator blocks exceeds --budget-gib or that runs out of device memory;
//     every attempt is recorded, with the longest length that fits.
//   --quick: a 2-layer model and short sequences, to check the flow on a device in seconds.
// OUT_JSON is rewritten after every configuration, so a run cut short keeps what it measured;
// a configuration that fails (out of memory included) is recorded with its error, never fatal.
// Exit: 0 done, 1 bad usage or setup, 2 no CUDA device visible.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/gpt_params.h"
#include "parallel/process_groups.h"
#include "runtime/allocator.h"
#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/kernels/cuda/device.h"
#include "trainer/config.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/synthetic.h"
#include "trainer/export/safetensors.h"
#include "trainer/metrics.h"
#include "trainer/train.h"

namespace {

using Clock = std::chrono::steady_clock;
using runtime::MemoryCategory;

constexpr int64_t kBytesPerGiB = int64_t{1} << 30;
// Megatron's GPT pretraining defaults; dropout masks (1 byte each) are part of the stash.
constexpr double kDropout = 0.1;

const char* kUsage =
    "usage: bench_gpu OUT_JSON [--budget-gib 80] [--warmup 2] [--steps 3] [--sweep-warmup 1]\n"
    "                 [--sweep-steps 1] [--peak-tflops 989.4] [--table-only] [--quick]\n";

struct Options {
  std::string out_path;
  double budget_gib = 80;  // the sweep's memory budget (an H100-80GB)
  int warmup_steps = 2;    // throughput table, per preset
  int timed_steps = 3;
  int sweep_warmup_steps = 1;  // sequence sweep, per attempt
  int sweep_timed_steps = 1;
  double peak_tflops = trainer::kBf16PeakTflops;  // H100/H200 SXM dense bf16 (989.4)
  bool table_only = false;
  bool quick = false;
};

// Note [Micro batch of the throughput table]
// The 1.3B model holds 1.32e9 parameters (50304 padded vocabulary rows, 2048 positions) at
// 18 bytes each: bf16 weights 2, fp32 gradients 4, fp32 master weights 4, Adam moments 8, so
// 23.7 GB (22.1 GiB). Without recompute one layer keeps s*b*h*(34 + 5*a*s/h) bytes
// (Korthikanti et al. 2022); at s 2048, b 4, h 2048, a 16 that is 1.91 GB, 45.9 GB for 24
// layers, and with the head's logits the memory model predicts 43.6 GiB. Only one microbatch
// is in flight without a pipeline, so the step peaks near 66 GiB: inside the H200's 141 GB
// with room for the allocator's rounding. Micro batch 4 gives every GEMM 8192 rows; global
// batch 8 makes two microbatches, so gradient accumulation is part of the measured step.
struct BenchShape {
  int64_t num_layers = 24;
  int64_t hidden_size = 2048;
  int64_t num_attention_heads = 16;
  int64_t vocab_size = 50257;  // GPT-2's; the head costs what it costs, whatever the data
  int64_t table_seq_length = 2048;
  int64_t table_micro_batch = 4;
  int64_t table_global_batch = 8;
  std::vector<int64_t> sweep_seq_lengths = {2048, 4096, 8192, 16384, 32768};  // micro batch 1

  static BenchShape quick() { return {2, 256, 4, 50257, 512, 2, 4, {512, 1024, 2048, 4096}}; }
};

struct Preset {
  std::string name;
  std::vector<std::string> overrides;  // recompute.* as `--set` would give them
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> list = {
      {"none", {"recompute.granularity=none"}},
      {"selective core_attn", {"recompute.granularity=selective", "recompute.modules=[core_attn]"}},
      {"full uniform 1",
       {"recompute.granularity=full", "recompute.method=uniform", "recompute.num_layers=1"}},
  };
  return list;
}

struct RunSpec {
  const Preset* preset = nullptr;
  int64_t seq_length = 0;
  int64_t micro_batch = 0;
  int64_t global_batch = 0;
  int warmup_steps = 0;
  int timed_steps = 0;

  int64_t tokens_needed() const {
    return (warmup_steps + timed_steps) * global_batch * (seq_length + 1);
  }
};

struct Measurement {
  RunSpec spec;
  int64_t parameters = 0;
  std::string error;            // empty: every step ran
  bool out_of_memory = false;   // the error is a failed device allocation
  std::vector<double> step_ms;  // every step that ran, warmup first
  // Over the timed steps (set only when they all ran): total work / total time.
  std::optional<double> tokens_per_s, model_tflops, hardware_tflops;
  int64_t recompute_flops = 0;  // per step
  // The most any step reached (at a failure: what was reached before it). Requested bytes per
  // category, each peaking at its own moment; all categories live at once, as requested and as
  // the allocator's blocks; bytes held from the device, cached blocks included.
  std::array<int64_t, runtime::kNumMemoryCategories> peak_bytes{};
  int64_t peak_live_bytes = 0;
  int64_t peak_live_block_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t predicted_activation_peak = 0;
  double setup_s = 0;  // building the trainer: host init, upload, plan
  double total_s = 0;
};

enum class Outcome { ok, over_budget, out_of_memory, error };

const char* outcome_name(Outcome outcome) {
  constexpr std::array<const char*, 4> kNames = {"ok", "over_budget", "out_of_memory", "error"};
  return kNames[static_cast<size_t>(outcome)];
}

// budget_bytes: the sweep's budget; none for the throughput table.
Outcome outcome_of(const Measurement& m, std::optional<int64_t> budget_bytes) {
  if (m.out_of_memory) return Outcome::out_of_memory;
  if (!m.error.empty()) return Outcome::error;
  if (budget_bytes && m.peak_live_block_bytes > *budget_bytes) return Outcome::over_budget;
  return Outcome::ok;
}

// What a device allocation failure says: the caching allocator's LibraryError carries CUDA's
// "out of memory"; cuBLAS reports its own allocation failures.
bool is_out_of_memory(std::string_view message) {
  return message.find("out of memory") != std::string_view::npos ||
         message.find("ALLOC_FAILED") != std::string_view::npos;
}

// Forwards every call to the device allocator and adds what its statistics cannot give: the
// peak of the bytes live in all categories at once, as requested and as the blocks they occupy
// (the memory a device must have once the allocator's cache is released, as it is on a failed
// cudaMalloc). reset_peaks() starts a new window here too, so the peaks are per step.
class LivePeakAllocator final : public runtime::Allocator {
 public:
  explicit LivePeakAllocator(runtime::cuda::CudaAllocator& device) : device_(device) {}
  LivePeakAllocator(const LivePeakAllocator&) = delete;
  LivePeakAllocator& operator=(const LivePeakAllocator&) = delete;

  runtime::DeviceKind device() const override { return device_.device(); }
  void* allocate(int64_t bytes, MemoryCategory category) override {
    void* ptr = device_.allocate(bytes, category);  // throws on failure: nothing counted
    std::lock_guard<std::mutex> lock(mutex_);
    requested_.add(bytes);
    blocks_.add(runtime::cuda::CudaAllocator::rounded_size(bytes));
    return ptr;
  }
  void deallocate(void* ptr, int64_t bytes, MemoryCategory category) override {
    if (ptr == nullptr) return;
    device_.deallocate(ptr, bytes, category);
    std::lock_guard<std::mutex> lock(mutex_);
    requested_.remove(bytes);
    blocks_.remove(runtime::cuda::CudaAllocator::rounded_size(bytes));
  }
  runtime::AllocatorStats stats() const override { return device_.stats(); }
  void reset_peaks() override {
    device_.reset_peaks();
    std::lock_guard<std::mutex> lock(mutex_);
    requested_.peak = requested_.current;
    blocks_.peak = blocks_.current;
  }
  void release_cache() { device_.release_cache(); }

  // Bytes live in all categories together: as requested, and as rounded blocks.
  runtime::MemoryStat live_requested() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requested_;
  }
  runtime::MemoryStat live_blocks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocks_;
  }

 private:
  runtime::cuda::CudaAllocator& device_;
  mutable std::mutex mutex_;
  runtime::MemoryStat requested_;
  runtime::MemoryStat blocks_;
};

// The process-wide device state every Trainer of the run shares.
struct Device {
  runtime::cuda::CudaContext context;
  runtime::cuda::CudaAllocator cuda_allocator;
  LivePeakAllocator allocator{cuda_allocator};
  parallel::ProcessGroups groups = parallel::ProcessGroups::single();
};

// A temporary folder for the dataset and the trainer's run directory.
class WorkDir {
 public:
  WorkDir()
      : path_(std::filesystem::temp_directory_path() /
              ("bench-gpu-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~WorkDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

class Progress {
 public:
  // "[  12.3 s] text", flushed, so a log cut short still tells where it stopped.
  void line(const std::string& text) const {
    std::printf("[%7.1f s] %s\n", elapsed_s(), text.c_str());
    std::fflush(stdout);
  }
  double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  Clock::time_point start_ = Clock::now();
};

std::string format(const char* fmt, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, fmt, value);
  return buffer;
}

// The run's configuration as `--set` overrides (parsed by measure(), which records a rejection).
std::vector<std::string> config_overrides(const BenchShape& shape, const Options& options,
                                          const RunSpec& spec, const std::string& data_prefix,
                                          const std::string& run_dir) {
  auto set = [](const char* key, auto value) {
    return std::string(key) + "=" + std::to_string(value);
  };
  std::vector<std::string> overrides = {
      "data.path=" + data_prefix,
      "data.split=[1]",
      "output.dir=" + run_dir,
      "output.export=false",
      set("model.num_layers", shape.num_layers),
      set("model.hidden_size", shape.hidden_size),
      set("model.num_attention_heads", shape.num_attention_heads),
      set("model.seq_length", spec.seq_length),
      set("model.vocab_size", shape.vocab_size),
      set("model.hidden_dropout", kDropout),
      set("model.attention_dropout", kDropout),
      "train.device=cuda",
      "train.precision=bf16",
      set("train.micro_batch_size", spec.micro_batch),
      set("train.global_batch_size", spec.global_batch),
      set("train.steps", spec.warmup_steps + spec.timed_steps),
      "train.eval_interval=0",
      set("train.peak_tflops", options.peak_tflops),
  };
  overrides.insert(overrides.end(), spec.preset->overrides.begin(), spec.preset->overrides.end());
  return overrides;
}

// Folds the allocator's peaks of the current window (one step: train_step starts a window).
void note_peaks(Measurement& m, const LivePeakAllocator& allocator) {
  const runtime::AllocatorStats stats = allocator.stats();
  for (MemoryCategory category : runtime::kAllMemoryCategories) {
    int64_t& peak = m.peak_bytes[static_cast<size_t>(category)];
    peak = std::max(peak, stats[category].peak);
  }
  m.peak_reserved_bytes = std::max(m.peak_reserved_bytes, stats.reserved.peak);
  m.peak_live_bytes = std::max(m.peak_live_bytes, allocator.live_requested().peak);
  m.peak_live_block_bytes = std::max(m.peak_live_block_bytes, allocator.live_blocks().peak);
}

std::string describe(const RunSpec& spec) {
  return spec.preset->name + ", seq " + std::to_string(spec.seq_length) + ", micro batch " +
         std::to_string(spec.micro_batch) + ", global batch " + std::to_string(spec.global_batch);
}

// Builds one Trainer, runs its warmup and timed steps, destroys it. A failure (a rejected
// config, out of memory, a device error) is recorded in the measurement, never thrown.
Measurement measure(const RunSpec& spec, const std::vector<std::string>& overrides, Device& device,
                    const Progress& progress) {
  Measurement m;
  m.spec = spec;
  device.allocator.release_cache();  // what an earlier run cached counts against nothing here
  device.allocator.reset_peaks();
  progress.line(describe(spec) + ": building the trainer");
  const auto start = Clock::now();
  auto seconds_since_start = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  try {
    const trainer::Config config = trainer::parse_config("", "bench_gpu", overrides);
    m.parameters = model::GptParams::count(config.model);
    trainer::Trainer trainer(config, device.groups, device.allocator, std::cout);
    m.predicted_activation_peak = trainer.predicted_activation_peak();
    m.setup_s = seconds_since_start();
    const int total_steps = spec.warmup_steps + spec.timed_steps;
    double timed_s = 0, model_flop = 0, hardware_flop = 0;
    for (int step = 0; step < total_steps; ++step) {
      const trainer::StepMetrics metrics = trainer.train_step();
      note_peaks(m, device.allocator);
      m.step_ms.push_back(metrics.step_ms);
      const bool warmup = step < spec.warmup_steps;
      progress.line("  step " + std::to_string(step + 1) + "/" + std::to_string(total_steps) +
                    (warmup ? " (warmup)" : "") + ": " + format("%.1f ms", metrics.step_ms) +
                    format(", %.0f tok/s", metrics.tokens_per_s) +
                    format(", loss %.3f", metrics.loss));
      if (warmup) continue;
      const double seconds = metrics.step_ms / 1e3;
      timed_s += seconds;
      model_flop += metrics.model_tflops * 1e12 * seconds;
      hardware_flop += metrics.hardware_tflops * 1e12 * seconds;
      m.recompute_flops = metrics.recompute_flops;
    }
    if (spec.timed_steps > 0 && timed_s > 0) {
      m.tokens_per_s =
          static_cast<double>(spec.timed_steps * spec.global_batch * spec.seq_length) / timed_s;
      m.model_tflops = model_flop / timed_s / 1e12;
      m.hardware_tflops = hardware_flop / timed_s / 1e12;
    }
  } catch (const std::exception& e) {
    m.error = e.what();
    m.out_of_memory = is_out_of_memory(m.error);
    note_peaks(m, device.allocator);  // the peaks reached before the failure
  }
  m.total_s = seconds_since_start();
  device.allocator.release_cache();
  int64_t still_live = 0;
  for (const runtime::MemoryStat& stat : device.allocator.stats().by_category)
    still_live += stat.current;
  if (still_live != 0) {
    progress.line("  warning: " + std::to_string(still_live) +
                  " bytes still allocated after the trainer was destroyed");
  }
  return m;
}

// ---- the report ----

struct Report {
  Options options;
  BenchShape shape;
  std::vector<Measurement> table;               // one per preset
  std::vector<std::vector<Measurement>> sweep;  // per preset, its attempts in order
  double elapsed_s = 0;
  bool complete = false;

  int64_t budget_bytes() const { return static_cast<int64_t>(options.budget_gib * kBytesPerGiB); }
  const Measurement* table_entry(std::string_view preset) const {
    for (const Measurement& m : table)
      if (m.spec.preset->name == preset) return &m;
    return nullptr;
  }
  // Throughput of `preset` over `none`, when both ran.
  std::optional<double> throughput_ratio(std::string_view preset) const {
    const Measurement* base = table_entry("none");
    const Measurement* other = table_entry(preset);
    if (!base || !other || !base->tokens_per_s || !other->tokens_per_s) return std::nullopt;
    return *other->tokens_per_s / *base->tokens_per_s;
  }
  std::optional<double> mfu(const Measurement& m) const {
    if (!m.model_tflops) return std::nullopt;
    return *m.model_tflops / options.peak_tflops;
  }
  std::optional<double> hfu(const Measurement& m) const {
    if (!m.hardware_tflops) return std::nullopt;
    return *m.hardware_tflops / options.peak_tflops;
  }
};

struct Target {
  std::string name;
  std::optional<double> value;
  double threshold = 0;  // met when value >= threshold
};

std::vector<Target> targets(const Report& report) {
  const Measurement* none = report.table_entry("none");
  return {{"MFU without recompute", none ? report.mfu(*none) : std::nullopt, 0.40},
          {"full uniform 1 throughput / none", report.throughput_ratio("full uniform 1"), 0.72},
          {"selective core_attn throughput / none", report.throughput_ratio("selective core_attn"),
           0.95}};
}

// The longest sequence of a preset's attempts that ran within the budget.
std::optional<int64_t> longest_fitting(const std::vector<Measurement>& attempts, int64_t budget) {
  std::optional<int64_t> longest;
  for (const Measurement& m : attempts)
    if (outcome_of(m, budget) == Outcome::ok) longest = m.spec.seq_length;
  return longest;
}

std::string json_number(std::optional<double> value) {
  if (!value || !std::isfinite(*value)) return "null";
  return format("%.6g", *value);
}

std::string json_array(const std::vector<std::string>& items) {
  std::string text = "[";
  for (size_t i = 0; i < items.size(); ++i) text += (i ? ", " : "") + items[i];
  return text + "]";
}

// One JSON object, field by field: JsonObject().integer("a", 1).text("b", "x").str().
class JsonObject {
 public:
  JsonObject& raw(std::string_view key, const std::string& json) {
    text_ += (text_.empty() ? "{" : ", ") + trainer::json_quote(key) + ": " + json;
    return *this;
  }
  JsonObject& integer(std::string_view key, int64_t value) {
    return raw(key, std::to_string(value));
  }
  JsonObject& number(std::string_view key, std::optional<double> value) {
    return raw(key, json_number(value));
  }
  JsonObject& text(std::string_view key, std::string_view value) {
    return raw(key, trainer::json_quote(value));
  }
  JsonObject& boolean(std::string_view key, bool value) {
    return raw(key, value ? "true" : "false");
  }
  std::string str() const { return text_.empty() ? "{}" : text_ + "}"; }

 private:
  std::string text_;
};

std::string json_measurement(const Report& report, const Measurement& m,
                             std::optional<int64_t> budget) {
  JsonObject j;
  j.text("preset", m.spec.preset->name)
      .integer("seq_length", m.spec.seq_length)
      .integer("micro_batch", m.spec.micro_batch)
      .integer("global_batch", m.spec.global_batch)
      .integer("parameters", m.parameters)
      .text("outcome", outcome_name(outcome_of(m, budget)));
  if (!m.error.empty()) j.text("error", m.error);
  std::vector<std::string> step_ms;
  for (double ms : m.step_ms) step_ms.push_back(format("%.3f", ms));
  JsonObject peaks;
  for (MemoryCategory category : runtime::kAllMemoryCategories)
    peaks.integer(runtime::category_name(category), m.peak_bytes[static_cast<size_t>(category)]);
  j.raw("step_ms", json_array(step_ms))
      .number("tokens_per_s", m.tokens_per_s)
      .number("model_tflops", m.model_tflops)
      .number("hardware_tflops", m.hardware_tflops)
      .number("mfu", report.mfu(m))
      .number("hfu", report.hfu(m))
      .integer("recompute_flops_per_step", m.recompute_flops)
      .raw("peak_bytes", peaks.str())
      .integer("peak_live_bytes", m.peak_live_bytes)
      .integer("peak_live_block_bytes", m.peak_live_block_bytes)
      .integer("peak_reserved_bytes", m.peak_reserved_bytes)
      .integer("predicted_activation_peak_bytes", m.predicted_activation_peak)
      .integer("measured_activation_peak_bytes",
               m.peak_bytes[static_cast<size_t>(MemoryCategory::activation)])
      .number("setup_s", m.setup_s)
      .number("total_s", m.total_s);
  return j.str();
}

std::string json_report(const Report& r) {
  const Options& o = r.options;
  const BenchShape& s = r.shape;
  const std::string model = JsonObject()
                                .integer("num_layers", s.num_layers)
                                .integer("hidden_size", s.hidden_size)
                                .integer("num_attention_heads", s.num_attention_heads)
                                .integer("vocab_size", s.vocab_size)
                                .number("dropout", kDropout)
                                .text("precision", "bf16")
                                .boolean("quick", o.quick)
                                .str();
  std::vector<std::string> runs;
  JsonObject over_none;
  for (const Measurement& m : r.table) {
    runs.push_back(json_measurement(r, m, std::nullopt));
    over_none.number(m.spec.preset->name, r.throughput_ratio(m.spec.preset->name));
  }
  const std::string throughput = JsonObject()
                                     .integer("seq_length", s.table_seq_length)
                                     .integer("micro_batch", s.table_micro_batch)
                                     .integer("global_batch", s.table_global_batch)
                                     .integer("warmup_steps", o.warmup_steps)
                                     .integer("timed_steps", o.timed_steps)
                                     .raw("runs", json_array(runs))
                                     .raw("throughput_over_none", over_none.str())
                                     .str();
  std::vector<std::string> goals;
  for (const Target& t : targets(r)) {
    goals.push_back(JsonObject()
                        .text("name", t.name)
                        .number("value", t.value)
                        .number("threshold", t.threshold)
                        .raw("met", !t.value                  ? "null"
                                    : *t.value >= t.threshold ? "true"
                                                              : "false")
                        .str());
  }
  std::vector<std::string> sweep;
  for (size_t p = 0; p < r.sweep.size(); ++p) {
    const std::optional<int64_t> longest = longest_fitting(r.sweep[p], r.budget_bytes());
    std::vector<std::string> attempts;
    for (const Measurement& m : r.sweep[p])
      attempts.push_back(json_measurement(r, m, r.budget_bytes()));
    sweep.push_back(
        JsonObject()
            .text("preset", presets()[p].name)
            .raw("longest_fitting_seq_length", longest ? std::to_string(*longest) : "null")
            .raw("attempts", json_array(attempts))
            .str());
  }
  const std::string sequence_sweep =
      JsonObject()
          .number("budget_gib", o.budget_gib)
          .integer("budget_bytes", r.budget_bytes())
          .text("budget_rule",
                "an attempt fits when every step ran and its peak_live_block_bytes (the allocator "
                "blocks live at once, all categories) is within the budget; the CUDA context and "
                "the cuBLASLt workspace, outside the allocator, are not counted")
          .integer("micro_batch", 1)
          .integer("global_batch", 1)
          .integer("warmup_steps", o.sweep_warmup_steps)
          .integer("timed_steps", o.sweep_timed_steps)
          .raw("presets", json_array(sweep))
          .str();
  return JsonObject()
             .raw("model", model)
             .number("peak_tflops", o.peak_tflops)
             .raw("throughput", throughput)
             .raw("targets", json_array(goals))
             .raw("sequence_sweep", sequence_sweep)
             .number("elapsed_s", r.elapsed_s)
             .boolean("complete", r.complete)
             .str() +
         "\n";
}

// Written to a temporary name and renamed, so the file is never half a report.
void write_report(const Report& report) {
  const std::string temporary = report.options.out_path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << json_report(report);
    if (!out) throw runtime::InputError("cannot write " + temporary);
  }
  std::filesystem::rename(temporary, report.options.out_path);
}

std::string percent(std::optional<double> fraction) {
  return fraction ? format("%.1f%%", 100.0 * *fraction) : "-";
}

void print_summary(const Report& r) {
  const BenchShape& s = r.shape;
  std::printf(
      "\nthroughput: seq %lld, micro batch %lld, global batch %lld, bf16, dropout %g, "
      "peak %g TFLOP/s\n",
      static_cast<long long>(s.table_seq_length), static_cast<long long>(s.table_micro_batch),
      static_cast<long long>(s.table_global_batch), kDropout, r.options.peak_tflops);
  std::printf("| %-20s | %9s | %7s | %6s | %6s | %7s | %11s | %11s | %11s | %11s |\n", "preset",
              "tok/s", "TFLOP/s", "MFU", "HFU", "vs none", "act peak", "predicted", "live peak",
              "reserved");
  for (const Measurement& m : r.table) {
    if (!m.tokens_per_s) {
      std::printf("| %-20s | %s\n", m.spec.preset->name.c_str(), m.error.c_str());
      continue;
    }
    const std::optional<double> ratio = r.throughput_ratio(m.spec.preset->name);
    std::printf("| %-20s | %9.0f | %7.1f | %6s | %6s | %7s | %11s | %11s | %11s | %11s |\n",
                m.spec.preset->name.c_str(), *m.tokens_per_s, *m.model_tflops,
                percent(r.mfu(m)).c_str(), percent(r.hfu(m)).c_str(),
                ratio ? format("%.3fx", *ratio).c_str() : "-",
                trainer::format_bytes(m.peak_bytes[static_cast<size_t>(MemoryCategory::activation)])
                    .c_str(),
                trainer::format_bytes(m.predicted_activation_peak).c_str(),
                trainer::format_bytes(m.peak_live_bytes).c_str(),
                trainer::format_bytes(m.peak_reserved_bytes).c_str());
  }
  std::printf("targets:\n");
  for (const Target& t : targets(r)) {
    std::printf("  %-40s %8s (target >= %s): %s\n", t.name.c_str(),
                t.value ? format("%.3f", *t.value).c_str() : "-",
                format("%.2f", t.threshold).c_str(),
                !t.value                  ? "not measured"
                : *t.value >= t.threshold ? "met"
                                          : "NOT met");
  }
  if (r.sweep.empty()) return;
  std::printf("longest sequence within %g GiB of live allocator blocks (micro batch 1):\n",
              r.options.budget_gib);
  for (size_t p = 0; p < r.sweep.size(); ++p) {
    const std::optional<int64_t> longest = longest_fitting(r.sweep[p], r.budget_bytes());
    std::printf("  %-20s %6s:", presets()[p].name.c_str(),
                longest ? std::to_string(*longest).c_str() : "-");
    for (const Measurement& m : r.sweep[p]) {
      std::printf(" %lld %s (%s)", static_cast<long long>(m.spec.seq_length),
                  outcome_name(outcome_of(m, r.budget_bytes())),
                  trainer::format_bytes(m.peak_live_block_bytes).c_str());
    }
    std::printf("\n");
  }
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw runtime::InputError(arg + " needs a value");
      return argv[++i];
    };
    auto count = [&](int minimum) {
      const int n = std::stoi(value());
      if (n < minimum) throw runtime::InputError(arg + " must be >= " + std::to_string(minimum));
      return n;
    };
    if (arg == "--budget-gib")
      o.budget_gib = std::stod(value());
    else if (arg == "--warmup")
      o.warmup_steps = count(0);
    else if (arg == "--steps")
      o.timed_steps = count(1);
    else if (arg == "--sweep-warmup")
      o.sweep_warmup_steps = count(0);
    else if (arg == "--sweep-steps")
      o.sweep_timed_steps = count(1);
    else if (arg == "--peak-tflops")
      o.peak_tflops = std::stod(value());
    else if (arg == "--table-only")
      o.table_only = true;
    else if (arg == "--quick")
      o.quick = true;
    else if (arg.rfind("--", 0) == 0 || !o.out_path.empty())
      throw runtime::InputError("unknown argument '" + arg + "'");
    else
      o.out_path = arg;
  }
  if (o.out_path.empty()) throw runtime::InputError("OUT_JSON is required");
  if (!(o.budget_gib > 0) || !(o.peak_tflops > 0)) {
    throw runtime::InputError("--budget-gib and --peak-tflops must be > 0");
  }
  return o;
}

// Every configuration the run will try.
struct BenchPlan {
  std::vector<RunSpec> table;               // one per preset
  std::vector<std::vector<RunSpec>> sweep;  // per preset, shortest sequence first

  int64_t tokens_needed() const {
    int64_t needed = 0;
    for (const RunSpec& spec : table) needed = std::max(needed, spec.tokens_needed());
    for (const std::vector<RunSpec>& attempts : sweep)
      for (const RunSpec& spec : attempts) needed = std::max(needed, spec.tokens_needed());
    return needed;
  }
};

BenchPlan make_plan(const Options& o, const BenchShape& s) {
  BenchPlan plan;
  for (const Preset& preset : presets()) {
    plan.table.push_back({&preset, s.table_seq_length, s.table_micro_batch, s.table_global_batch,
                          o.warmup_steps, o.timed_steps});
    if (o.table_only) continue;
    std::vector<RunSpec>& attempts = plan.sweep.emplace_back();
    for (int64_t seq : s.sweep_seq_lengths)
      attempts.push_back({&preset, seq, 1, 1, o.sweep_warmup_steps, o.sweep_timed_steps});
  }
  return plan;
}

// A synthetic corpus of `num_tokens` (a few distinct token values: the model's vocabulary, not
// the data, sets the cost of the head).
void write_dataset(const std::string& prefix, int64_t num_tokens) {
  trainer::SyntheticCorpusSpec corpus_spec;
  corpus_spec.num_tokens = num_tokens;
  const trainer::SyntheticCorpus corpus = trainer::make_synthetic_corpus(corpus_spec);
  trainer::IndexedDatasetWriter writer(prefix, trainer::TokenDType::uint16);
  writer.add_document(corpus.tokens);
  writer.finish();
}

int run(const Options& options) {
  Report report;
  report.options = options;
  report.shape = options.quick ? BenchShape::quick() : BenchShape();
  const BenchPlan plan = make_plan(options, report.shape);
  write_report(report);  // an unwritable OUT_JSON fails here, before any device time
  const Progress progress;
  runtime::cuda::select_device_for_local_rank(0);
  Device device;
  runtime::cuda::register_cuda_backend(device.context);
  const WorkDir work;
  write_dataset(work / "data", 2 * plan.tokens_needed());  // every planned step, twice over
  progress.line("dataset written; " + std::to_string(plan.table.size()) + " table runs" +
                (options.table_only ? " (sweep skipped: --table-only)" : ", then the sweep"));
  auto run_spec = [&](const RunSpec& spec) {
    Measurement m =
        measure(spec, config_overrides(report.shape, options, spec, work / "data", work / "run"),
                device, progress);
    progress.line(describe(spec) + ": " +
                  (m.error.empty() ? format("%.0f tok/s", m.tokens_per_s.value_or(0)) + ", MFU " +
                                         percent(report.mfu(m)) + ", live peak " +
                                         trainer::format_bytes(m.peak_live_block_bytes)
                                   : "failed: " + m.error));
    return m;
  };
  for (const RunSpec& spec : plan.table) {
    report.table.push_back(run_spec(spec));
    report.elapsed_s = progress.elapsed_s();
    write_report(report);
  }
  for (const std::vector<RunSpec>& attempts : plan.sweep) {
    std::vector<Measurement>& done = report.sweep.emplace_back();
    for (const RunSpec& spec : attempts) {
      done.push_back(run_spec(spec));
      report.elapsed_s = progress.elapsed_s();
      write_report(report);
      // Longer sequences need more memory: the first that does not fit ends the preset.
      if (outcome_of(done.back(), report.budget_bytes()) != Outcome::ok) break;
    }
  }
  report.complete = true;
  report.elapsed_s = progress.elapsed_s();
  write_report(report);
  print_summary(report);
  progress.line("wrote " + options.out_path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n%s", e.what(), kUsage);
    return 1;
  }
  if (runtime::cuda::device_count() == 0) {
    std::fprintf(stderr,
                 "bench_gpu: no CUDA device is visible to this process; the GPU benchmark needs "
                 "one (nothing was written)\n");
    return 2;
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 1;
  }
}
