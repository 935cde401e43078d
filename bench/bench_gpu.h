// The GPU benchmark's shapes, presets (attention backend x recompute), measurements and report
// (bench_gpu.cpp runs them, bench_gpu_report.cpp writes them as JSON and as the printed summary).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/bench_common.h"
#include "runtime/allocator.h"
#include "trainer/config/config.h"

namespace bench_gpu {

// printf-style formatting of one number.
inline std::string format(const char* fmt, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, fmt, value);
  return buffer;
}

// "41.3%", or "-" for no value.
inline std::string percent(std::optional<double> fraction) {
  return fraction ? format("%.1f%%", 100.0 * *fraction) : "-";
}

constexpr int64_t kBytesPerGiB = int64_t{1} << 30;
using bench::kDropout;  // Megatron's GPT pretraining default; its masks are part of the stash

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
  bool smoke = false;  // BenchShape::smoke(): the flow on host CUDA
  bool llama = false;  // --model llama: the Llama shapes (BenchShape::llama_1b() and its twins)
  // Seconds from the start; a configuration predicted to end past it is skipped (and listed).
  // 0: no limit.
  double time_limit_s = 0;
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
  // The sequence sweep, micro batch 1: unfused attention keeps (heads, s, s) tensors per layer,
  // flash attention only O(s) ones, so its sweep goes 4x further.
  std::vector<int64_t> sweep_seq_lengths = {2048, 4096, 8192, 16384, 32768};
  std::vector<int64_t> flash_sweep_seq_lengths = {2048, 4096, 8192, 16384, 32768, 65536, 131072};
  // The roofline's machine measurement: the square bf16 GEMM and the elements copied.
  int64_t roofline_gemm = 8192;
  int64_t roofline_copy_elements = int64_t{1} << 28;  // 512 MiB of bf16 each way

  // The block (model.architecture): gpt2, or llama with its key/value heads, SwiGLU width, RoPE
  // base and no dropout (Hugging Face's LlamaForCausalLM; Megatron's GPT keeps kDropout).
  std::string architecture = "gpt2";
  int64_t num_query_groups = 0;  // 0: num_attention_heads
  int64_t ffn_hidden_size = 0;   // 0: the architecture's default (4 * hidden_size for gpt2)
  double rotary_base = 10000;
  double dropout = kDropout;

  static BenchShape quick() {
    return {2, 256, 4, 50257, 512, 2, 4, {512, 1024, 2048, 4096}, {512, 1024, 2048, 4096, 8192}};
  }
  // Seconds on host CUDA (tests/host_cuda): every step of the flow at a CPU's size.
  static BenchShape smoke() {
    BenchShape s{1, 64, 2, 256, 64, 2, 4, {64, 128}, {64, 128, 256}};
    s.roofline_gemm = 128;
    s.roofline_copy_elements = int64_t{1} << 16;
    return s;
  }
  // Note [The Llama bench shape]
  // configs/llama_1b_gpu.yaml's model, a Llama-3.2-1B shape with an untied head: 16 layers,
  // hidden 2048, 32 query heads sharing 8 key/value heads, SwiGLU 8192, RoPE theta 500000,
  // vocabulary 128256 (a multiple of 128: no padding), 1.50e9 parameters, 27 GB of weights,
  // gradients and optimizer state at 18 bytes each. Its sequence, 4096, at micro batch 2 gives
  // every GEMM the GPT table's 8192 rows. Without dropout unfused attention keeps the (32, 4096,
  // 4096) bf16 probabilities per layer and microbatch (2 GiB): `trainer plan` predicts 43.3 GiB
  // of activations and 71.2 GiB in all without recompute, flash 11.3 and 37.5 GiB.
  static BenchShape llama_1b() {
    BenchShape s{16,
                 2048,
                 32,
                 128256,
                 4096,
                 2,
                 4,
                 {2048, 4096, 8192, 16384},
                 {4096, 8192, 16384, 32768, 65536, 131072}};
    s.set_llama(8, 8192, 500000);
    return s;
  }
  static BenchShape llama_quick() {
    BenchShape s = quick();
    s.vocab_size = 128256;
    s.set_llama(2, 688, 500000);
    return s;
  }
  static BenchShape llama_smoke() {
    BenchShape s = smoke();
    s.num_attention_heads = 4;
    s.set_llama(2, 96, 10000);
    return s;
  }
  void set_llama(int64_t groups, int64_t ffn, double base) {
    architecture = "llama";
    num_query_groups = groups;
    ffn_hidden_size = ffn;
    rotary_base = base;
    dropout = 0;
  }
  bool is_llama() const { return architecture == "llama"; }
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  int64_t kv_heads() const { return num_query_groups > 0 ? num_query_groups : num_attention_heads; }
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  // The fused QKV projection's and fc1's output widths (SwiGLU's fc1 is [gate | up]).
  int64_t qkv_width() const { return (num_attention_heads + 2 * kv_heads()) * head_dim(); }
  int64_t fc1_width() const { return is_llama() ? 2 * ffn() : ffn(); }
  const std::vector<int64_t>& sweep_lengths(bool flash) const {
    return flash ? flash_sweep_seq_lengths : sweep_seq_lengths;
  }
};

struct Preset {
  std::string name;                    // the recompute preset's, "flash " first for flash
  std::string recompute;               // none, selective core_attn or full uniform 1
  std::string attention_backend;       // model.attention_backend: unfused or flash
  std::vector<std::string> overrides;  // recompute.* as `--set` would give them

  bool flash() const { return attention_backend == "flash"; }
};

// The three recompute presets with unfused attention ("none", ...), then the same three with
// flash attention ("flash none", ...).
inline const std::vector<Preset>& presets() {
  static const std::vector<Preset> list = [] {
    const std::vector<std::pair<std::string, std::vector<std::string>>> recompute = {
        {"none", {"recompute.granularity=none"}},
        {"selective core_attn",
         {"recompute.granularity=selective", "recompute.modules=[core_attn]"}},
        {"full uniform 1",
         {"recompute.granularity=full", "recompute.method=uniform", "recompute.num_layers=1"}},
    };
    std::vector<Preset> all;
    for (const std::string backend : {"unfused", "flash"}) {
      for (const auto& [name, overrides] : recompute)
        all.push_back({(backend == "flash" ? "flash " : "") + name, name, backend, overrides});
    }
    return all;
  }();
  return list;
}

// The preset of one attention backend and recompute preset.
inline const Preset& preset_of(std::string_view attention_backend, std::string_view recompute) {
  for (const Preset& preset : presets())
    if (preset.attention_backend == attention_backend && preset.recompute == recompute)
      return preset;
  throw std::logic_error("bench_gpu has no preset " + std::string(attention_backend) + " " +
                         std::string(recompute));
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
  double setup_s = 0;  // building the trainer: allocation, init on the device, plan
  double total_s = 0;
};

enum class Outcome { ok, over_budget, out_of_memory, error };

inline const char* outcome_name(Outcome outcome) {
  constexpr std::array<const char*, 4> kNames = {"ok", "over_budget", "out_of_memory", "error"};
  return kNames[static_cast<size_t>(outcome)];
}

// budget_bytes: the sweep's budget; none for the throughput table.
inline Outcome outcome_of(const Measurement& m, std::optional<int64_t> budget_bytes) {
  if (m.out_of_memory) return Outcome::out_of_memory;
  if (!m.error.empty()) return Outcome::error;
  if (budget_bytes && m.peak_live_block_bytes > *budget_bytes) return Outcome::over_budget;
  return Outcome::ok;
}

namespace roofline {

// What the machine does: device-to-device copy bandwidth (bytes read plus written per second)
// and the rate of a large bf16 GEMM.
struct Machine {
  double copy_bytes_per_s = 0;
  double gemm_flops_per_s = 0;
};

// One op at the bench shape. limit_ms: the larger of bytes / copy bandwidth and FLOPs / GEMM
// rate; measured_ms / limit_ms says how far the kernel is from what the machine allows.
struct Line {
  std::string op;
  double bytes = 0;
  double flops = 0;
  double limit_ms = 0;
  double measured_ms = 0;
};

}  // namespace roofline

// The roofline lines (bench_gpu_roofline.h), measured before the table.
struct RooflineReport {
  roofline::Machine machine;
  std::vector<roofline::Line> lines;
  std::string error;  // set: the measurement failed there (lines holds none)
};

struct Report {
  Options options;
  BenchShape shape;
  std::vector<Measurement> table;               // one per preset
  std::vector<std::vector<Measurement>> sweep;  // per preset, its attempts in order
  std::vector<std::string> skipped_for_time;    // configurations --time-limit-s left out
  std::optional<RooflineReport> roofline;       // once measured
  double elapsed_s = 0;
  bool complete = false;

  int64_t budget_bytes() const { return static_cast<int64_t>(options.budget_gib * kBytesPerGiB); }
  const Measurement* table_entry(std::string_view preset) const {
    for (const Measurement& m : table)
      if (m.spec.preset->name == preset) return &m;
    return nullptr;
  }
  // Throughput of `preset` over that of `base`, when both ran.
  std::optional<double> throughput_over(std::string_view preset, std::string_view base) const {
    const Measurement* other = table_entry(preset);
    const Measurement* reference = table_entry(base);
    if (!reference || !other || !reference->tokens_per_s || !other->tokens_per_s)
      return std::nullopt;
    return *other->tokens_per_s / *reference->tokens_per_s;
  }
  // Over `none` of the same attention backend ("flash none" for a flash preset).
  std::optional<double> throughput_ratio(const Preset& preset) const {
    return throughput_over(preset.name, preset_of(preset.attention_backend, "none").name);
  }
  // A preset over its unfused twin ("flash none" over "none").
  std::optional<double> flash_speedup(const Preset& preset) const {
    return throughput_over(preset.name, preset_of("unfused", preset.recompute).name);
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

inline std::vector<Target> targets(const Report& report) {
  const Measurement* none = report.table_entry("none");
  return {
      {"MFU without recompute", none ? report.mfu(*none) : std::nullopt, 0.40},
      {"full uniform 1 throughput / none", report.throughput_over("full uniform 1", "none"), 0.72},
      {"selective core_attn throughput / none",
       report.throughput_over("selective core_attn", "none"), 0.95}};
}

// The longest sequence of a preset's attempts that ran within the budget.
inline std::optional<int64_t> longest_fitting(const std::vector<Measurement>& attempts,
                                              int64_t budget) {
  std::optional<int64_t> longest;
  for (const Measurement& m : attempts)
    if (outcome_of(m, budget) == Outcome::ok) longest = m.spec.seq_length;
  return longest;
}

// OUT_JSON, rewritten whole (a temporary file, then a rename).
void write_report(const Report& report);
// The tables and targets on stdout.
void print_summary(const Report& report);

}  // namespace bench_gpu
