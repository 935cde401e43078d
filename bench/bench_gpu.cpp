// GPU benchmark of the trainer itself: a GPT 1.3B-class model (--model llama: a Llama 1B-class
// one) in bf16 on one device under the recompute presets none, selective core_attn and full
// uniform 1, each with unfused attention and with flash attention (model.attention_backend).
// Each configuration is one trainer::Trainer, built, stepped and destroyed before the next, on
// one CudaContext and one CudaAllocator whose cache is released in between. Numbers are
// measured, never asserted.
//
// usage: bench_gpu OUT_JSON [--budget-gib 80] [--warmup 2] [--steps 3] [--sweep-warmup 1]
//                  [--sweep-steps 1] [--peak-tflops 989.4] [--time-limit-s S] [--table-only]
//                  [--quick | --smoke] [--model gpt|llama]
//   throughput table: seq 2048, micro batch 4, global batch 8 (Llama: seq 4096, micro batch 2,
//     global batch 4); per preset tokens/s, model and hardware TFLOP/s, MFU and HFU against
//     --peak-tflops (train.peak_tflops), peak bytes per category and live at once, peak
//     reserved bytes, predicted and measured activation peak;
//     then each preset's throughput against `none` of its attention backend, each flash
//     preset's against its unfused twin, and the targets (MFU >= 40% without recompute, full >=
//     0.72x none, selective core_attn >= 0.95x none; unfused) with their measured values.
//   sequence sweep: micro batch 1, seq 2048 to 32768 (flash: to 131072), per preset until the
//     first length whose peak of live allocator blocks exceeds --budget-gib or that runs out of
//     device memory; every attempt is recorded, with the longest length that fits. The presets
//     take turns, shortest lengths first.
//   --time-limit-s: configurations predicted to end later than S seconds after the start are
//     skipped and listed (a sweep attempt is predicted from its preset's previous one, the
//     steps scaled by the square of the length ratio); a preset's sweep ends at its first skip.
//   roofline (first, on stdout and in OUT_JSON's "roofline"): the copy bandwidth and bf16 GEMM
//     rate measured, then per op of a layer at the table's shape (the MLP's fused epilogue ops
//     beside the unfused ones) its bytes, FLOPs, the time they take at those rates and the
//     measured time (bench_gpu_roofline.h).
//   --quick: a 2-layer model and short sequences, to check the flow on a device in seconds.
//   --smoke: a 1-layer model of hidden 64 and a 128-square roofline GEMM, to run the whole flow
//     on host CUDA (bench_gpu_host_cuda, ctest host_cuda_bench_gpu_smoke) in seconds.
//   --model llama: configs/llama_1b_gpu.yaml's Llama block (Note [The Llama bench shape]) in
//     place of the GPT (--quick and --smoke take its Llama twins); the roofline's lines are its
//     own (GQA's QKV width, SwiGLU's fc1, RMSNorm, SwiGLU and RoPE).
// OUT_JSON is rewritten after every configuration, so a run cut short keeps what it measured;
// a configuration that fails (out of memory included) is recorded with its error, never fatal.
// Exit: 0 done, 1 bad usage or setup, 2 no CUDA device visible.
#include "bench/bench_gpu.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_gpu_roofline.h"
#include "model/gpt_params.h"
#include "parallel/core/process_groups.h"
#include "runtime/allocator.h"
#include "runtime/error.h"
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/kernels/cuda/device.h"
#include "trainer/config/config.h"
#include "trainer/export/safetensors.h"
#include "trainer/observe/metrics.h"
#include "trainer/run/train.h"
#include "trainer/util/format_bytes.h"

namespace bench_gpu {
namespace {

using Clock = std::chrono::steady_clock;
using runtime::MemoryCategory;

const char* kUsage =
    "usage: bench_gpu OUT_JSON [--budget-gib 80] [--warmup 2] [--steps 3] [--sweep-warmup 1]\n"
    "                 [--sweep-steps 1] [--peak-tflops 989.4] [--time-limit-s S] [--table-only]\n"
    "                 [--quick | --smoke] [--model gpt|llama]\n";

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
  std::string device_name() const override { return device_.device_name(); }
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

// The run's configuration as `--set` overrides (parsed by measure(), which records a rejection).
std::vector<std::string> config_overrides(const BenchShape& shape, const Options& options,
                                          const RunSpec& spec, const bench::WorkDir& work) {
  const bench::ModelShape model = {.num_layers = shape.num_layers,
                                   .hidden_size = shape.hidden_size,
                                   .num_attention_heads = shape.num_attention_heads,
                                   .vocab_size = shape.vocab_size,
                                   .seq_length = spec.seq_length};
  std::vector<std::string> overrides = bench::run_overrides(work, model);
  const std::vector<std::string> train = {
      "train.device=cuda",
      "train.precision=bf16",
      "model.attention_backend=" + spec.preset->attention_backend,
      bench::set("train.micro_batch_size", spec.micro_batch),
      bench::set("train.global_batch_size", spec.global_batch),
      bench::set("train.steps", spec.warmup_steps + spec.timed_steps),
      bench::set("train.peak_tflops", options.peak_tflops),
  };
  overrides.insert(overrides.end(), {bench::set("model.hidden_dropout", shape.dropout),
                                     bench::set("model.attention_dropout", shape.dropout)});
  if (shape.is_llama()) {
    overrides.insert(overrides.end(), {"model.architecture=llama",
                                       bench::set("model.num_query_groups", shape.num_query_groups),
                                       bench::set("model.ffn_hidden_size", shape.ffn_hidden_size),
                                       bench::set("model.rotary_base", shape.rotary_base)});
  }
  overrides.insert(overrides.end(), train.begin(), train.end());
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
    trainer::Trainer trainer(trainer::plan_run(config, device.groups, device.allocator),
                             device.groups, device.allocator, std::cout);
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

// --model's value: false for gpt, true for llama.
bool parse_model(const std::string& name) {
  if (name != "gpt" && name != "llama")
    throw runtime::InputError("--model: '" + name + "' is not gpt or llama");
  return name == "llama";
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
    else if (arg == "--time-limit-s")
      o.time_limit_s = std::stod(value());
    else if (arg == "--table-only")
      o.table_only = true;
    else if (arg == "--quick")
      o.quick = true;
    else if (arg == "--smoke")
      o.smoke = true;
    else if (arg == "--model")
      o.llama = parse_model(value());
    else if (arg.rfind("--", 0) == 0 || !o.out_path.empty())
      throw runtime::InputError("unknown argument '" + arg + "'");
    else
      o.out_path = arg;
  }
  if (o.out_path.empty()) throw runtime::InputError("OUT_JSON is required");
  if (o.quick && o.smoke) throw runtime::InputError("--quick and --smoke: one shape at most");
  if (!(o.budget_gib > 0) || !(o.peak_tflops > 0)) {
    throw runtime::InputError("--budget-gib and --peak-tflops must be > 0");
  }
  if (!(o.time_limit_s >= 0)) throw runtime::InputError("--time-limit-s must be >= 0");
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
    for (int64_t seq : s.sweep_lengths(preset.flash()))
      attempts.push_back({&preset, seq, 1, 1, o.sweep_warmup_steps, o.sweep_timed_steps});
  }
  return plan;
}

// A sweep attempt's duration predicted from its preset's previous (shorter) attempt: that one's
// setup plus its steps scaled by the square of the length ratio (attention's growth; an
// overestimate while the linear layers dominate).
double predicted_seconds(const Measurement& previous, int64_t seq_length) {
  double steps_s = 0;
  for (double ms : previous.step_ms) steps_s += ms / 1e3;
  const double ratio =
      static_cast<double>(seq_length) / static_cast<double>(previous.spec.seq_length);
  return previous.setup_s + steps_s * ratio * ratio;
}

// Runs a plan's configurations into the report, rewriting OUT_JSON after each, and skips (and
// lists) those --time-limit-s leaves no time for.
class Session {
 public:
  Session(Report& report, Device& device, const bench::WorkDir& work, const Progress& progress)
      : report_(report), device_(device), work_(work), progress_(progress) {}

  void run_table(const BenchPlan& plan) {
    for (const RunSpec& spec : plan.table) {
      const double predicted_s = report_.table.empty() ? 0 : report_.table.back().total_s;
      if (!time_for(spec, predicted_s)) continue;
      report_.table.push_back(run_spec(spec));
      record();
    }
  }

  // The presets take turns, shortest lengths first, so a time limit cuts the longest lengths
  // of every preset rather than whole presets. A preset's sweep ends at its first attempt that
  // does not fit (longer sequences need more memory) or that the time limit skips.
  void run_sweep(const BenchPlan& plan) {
    report_.sweep.assign(plan.sweep.size(), {});
    std::vector<bool> ended(plan.sweep.size(), false);
    for (size_t attempt = 0;; ++attempt) {
      bool any = false;
      for (size_t p = 0; p < plan.sweep.size(); ++p) {
        if (ended[p] || attempt >= plan.sweep[p].size()) continue;
        any = true;
        const RunSpec& spec = plan.sweep[p][attempt];
        std::vector<Measurement>& done = report_.sweep[p];
        if (!time_for(spec, done.empty() ? 0 : predicted_seconds(done.back(), spec.seq_length))) {
          ended[p] = true;
          continue;
        }
        done.push_back(run_spec(spec));
        record();
        ended[p] = outcome_of(done.back(), report_.budget_bytes()) != Outcome::ok;
      }
      if (!any) return;
    }
  }

 private:
  Measurement run_spec(const RunSpec& spec) {
    Measurement m = measure(spec, config_overrides(report_.shape, report_.options, spec, work_),
                            device_, progress_);
    progress_.line(describe(spec) + ": " +
                   (m.error.empty() ? format("%.0f tok/s", m.tokens_per_s.value_or(0)) + ", MFU " +
                                          percent(report_.mfu(m)) + ", live peak " +
                                          trainer::format_bytes(m.peak_live_block_bytes)
                                    : "failed: " + m.error));
    return m;
  }

  // Whether `spec`, predicted to take predicted_s, ends within the time limit; records a skip.
  bool time_for(const RunSpec& spec, double predicted_s) {
    const double limit_s = report_.options.time_limit_s, left_s = limit_s - progress_.elapsed_s();
    if (limit_s <= 0 || predicted_s <= left_s) return true;
    const std::string skipped = describe(spec) + format(": predicted %.0f s", predicted_s) +
                                format(", %.0f s left", left_s);
    progress_.line("skipped for --time-limit-s: " + skipped);
    report_.skipped_for_time.push_back(skipped);
    record();
    return false;
  }

  void record() {
    report_.elapsed_s = progress_.elapsed_s();
    write_report(report_);
  }

  Report& report_;
  Device& device_;
  const bench::WorkDir& work_;
  const Progress& progress_;
};

// The roofline lines (bench_gpu_roofline.h) into the report and on stdout, before the table; a
// failure is recorded and reported, never fatal.
void run_roofline(Report& report, Device& device, const Progress& progress) {
  RooflineReport& measured = report.roofline.emplace();
  try {
    roofline::Tensors tensors(device.allocator);
    measured.machine = roofline::measure_machine(report.shape, device.context, tensors);
    measured.lines =
        roofline::measure_lines(report.shape, measured.machine, device.context, tensors);
    roofline::print(measured.machine, measured.lines);
  } catch (const std::exception& e) {
    measured.error = e.what();
    progress.line(std::string("roofline skipped: ") + e.what());
  }
  device.allocator.release_cache();
  report.elapsed_s = progress.elapsed_s();
  write_report(report);
}

int run(const Options& options) {
  Report report;
  report.options = options;
  if (options.llama) {
    report.shape = options.smoke   ? BenchShape::llama_smoke()
                   : options.quick ? BenchShape::llama_quick()
                                   : BenchShape::llama_1b();
  } else {
    report.shape = options.smoke   ? BenchShape::smoke()
                   : options.quick ? BenchShape::quick()
                                   : BenchShape();
  }
  const BenchPlan plan = make_plan(options, report.shape);
  write_report(report);  // an unwritable OUT_JSON fails here, before any device time
  const Progress progress;
  runtime::cuda::select_device_for_local_rank(0);
  Device device;
  runtime::cuda::register_cuda_backend(device.context);
  run_roofline(report, device, progress);
  const bench::WorkDir work("bench-gpu");
  bench::write_dataset(work / "data", 2 * plan.tokens_needed());  // every planned step, twice
  progress.line("dataset written; " + std::to_string(plan.table.size()) + " table runs" +
                (options.table_only ? " (sweep skipped: --table-only)" : ", then the sweep"));
  Session session(report, device, work, progress);
  session.run_table(plan);
  session.run_sweep(plan);
  report.complete = true;
  report.elapsed_s = progress.elapsed_s();
  write_report(report);
  print_summary(report);
  progress.line("wrote " + options.out_path);
  return 0;
}

}  // namespace
}  // namespace bench_gpu

int main(int argc, char** argv) {
  bench_gpu::Options options;
  try {
    options = bench_gpu::parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n%s", e.what(), bench_gpu::kUsage);
    return 1;
  }
  if (runtime::cuda::device_count() == 0) {
    std::fprintf(stderr,
                 "bench_gpu: no CUDA device is visible to this process; the GPU benchmark needs "
                 "one (nothing was written)\n");
    return 2;
  }
  try {
    return bench_gpu::run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 1;
  }
}
