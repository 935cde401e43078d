// The GPU benchmark's report: JSON (every measurement, the targets, the budget rule) and the
// printed summary.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/bench_gpu.h"
#include "runtime/error.h"
#include "trainer/export/safetensors.h"
#include "trainer/util/format_bytes.h"
#include "trainer/util/json_object_writer.h"

namespace bench_gpu {
namespace {

using runtime::MemoryCategory;

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
      .text("attention_backend", m.spec.preset->attention_backend)
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

// The longest-sequence sweep: per preset, every attempt and the longest length that fit.
std::string json_sequence_sweep(const Report& r) {
  const Options& o = r.options;
  std::vector<std::string> sweep;
  for (size_t p = 0; p < r.sweep.size(); ++p) {
    const std::optional<int64_t> longest = longest_fitting(r.sweep[p], r.budget_bytes());
    std::vector<std::string> attempts;
    for (const Measurement& m : r.sweep[p])
      attempts.push_back(json_measurement(r, m, r.budget_bytes()));
    sweep.push_back(
        JsonObject()
            .text("preset", presets()[p].name)
            .text("attention_backend", presets()[p].attention_backend)
            .raw("longest_fitting_seq_length", longest ? std::to_string(*longest) : "null")
            .raw("attempts", json_array(attempts))
            .str());
  }
  return JsonObject()
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
}

// The roofline: the machine's measured rates and one object per op; null before it ran.
std::string json_roofline(const Report& r) {
  if (!r.roofline) return "null";
  const RooflineReport& measured = *r.roofline;
  std::vector<std::string> ops;
  for (const roofline::Line& line : measured.lines) {
    ops.push_back(JsonObject()
                      .text("op", line.op)
                      .number("bytes", line.bytes)
                      .number("flops", line.flops)
                      .number("limit_ms", line.limit_ms)
                      .number("measured_ms", line.measured_ms)
                      .number("measured_over_limit", line.measured_ms / line.limit_ms)
                      .str());
  }
  JsonObject j;
  j.number("copy_bytes_per_s", measured.machine.copy_bytes_per_s)
      .number("gemm_flops_per_s", measured.machine.gemm_flops_per_s)
      .raw("ops", json_array(ops));
  if (!measured.error.empty()) j.text("error", measured.error);
  return j.str();
}

std::string json_report(const Report& r) {
  const Options& o = r.options;
  const BenchShape& s = r.shape;
  const std::string model =
      JsonObject()
          .text("architecture", s.architecture)
          .integer("num_layers", s.num_layers)
          .integer("hidden_size", s.hidden_size)
          .integer("num_attention_heads", s.num_attention_heads)
          .integer("num_query_groups", s.kv_heads())
          .integer("ffn_hidden_size", s.ffn())
          .integer("vocab_size", s.vocab_size)
          .number("rotary_base", s.is_llama() ? std::optional<double>(s.rotary_base) : std::nullopt)
          .number("dropout", s.dropout)
          .text("precision", "bf16")
          .boolean("quick", o.quick)
          .boolean("smoke", o.smoke)
          .str();
  std::vector<std::string> runs;
  JsonObject over_none, flash_over_unfused;
  for (const Measurement& m : r.table) {
    runs.push_back(json_measurement(r, m, std::nullopt));
    over_none.number(m.spec.preset->name, r.throughput_ratio(*m.spec.preset));
    if (m.spec.preset->flash())
      flash_over_unfused.number(m.spec.preset->name, r.flash_speedup(*m.spec.preset));
  }
  const std::string throughput = JsonObject()
                                     .integer("seq_length", s.table_seq_length)
                                     .integer("micro_batch", s.table_micro_batch)
                                     .integer("global_batch", s.table_global_batch)
                                     .integer("warmup_steps", o.warmup_steps)
                                     .integer("timed_steps", o.timed_steps)
                                     .raw("runs", json_array(runs))
                                     .raw("throughput_over_none", over_none.str())
                                     .raw("flash_over_unfused", flash_over_unfused.str())
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
  const std::string sequence_sweep = json_sequence_sweep(r);
  std::vector<std::string> skipped;
  for (const std::string& what : r.skipped_for_time) skipped.push_back(trainer::json_quote(what));
  return JsonObject()
             .raw("model", model)
             .number("peak_tflops", o.peak_tflops)
             .raw("roofline", json_roofline(r))
             .raw("throughput", throughput)
             .raw("targets", json_array(goals))
             .raw("sequence_sweep", sequence_sweep)
             .number("time_limit_s",
                     o.time_limit_s > 0 ? std::optional<double>(o.time_limit_s) : std::nullopt)
             .raw("skipped_for_time", json_array(skipped))
             .number("elapsed_s", r.elapsed_s)
             .boolean("complete", r.complete)
             .str() +
         "\n";
}

}  // namespace

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

void print_summary(const Report& r) {
  const BenchShape& s = r.shape;
  std::printf(
      "\nthroughput (%s): seq %lld, micro batch %lld, global batch %lld, bf16, dropout %g, "
      "peak %g TFLOP/s\n",
      s.architecture.c_str(), static_cast<long long>(s.table_seq_length),
      static_cast<long long>(s.table_micro_batch), static_cast<long long>(s.table_global_batch),
      s.dropout, r.options.peak_tflops);
  std::printf("| %-25s | %9s | %7s | %6s | %6s | %7s | %7s | %11s | %11s | %11s | %11s |\n",
              "preset", "tok/s", "TFLOP/s", "MFU", "HFU", "vs none", "vs unf.", "act peak",
              "predicted", "live peak", "reserved");
  for (const Measurement& m : r.table) {
    if (!m.tokens_per_s) {
      std::printf("| %-25s | %s\n", m.spec.preset->name.c_str(), m.error.c_str());
      continue;
    }
    const std::optional<double> ratio = r.throughput_ratio(*m.spec.preset);
    const std::optional<double> speedup =
        m.spec.preset->flash() ? r.flash_speedup(*m.spec.preset) : std::nullopt;
    std::printf("| %-25s | %9.0f | %7.1f | %6s | %6s | %7s | %7s | %11s | %11s | %11s | %11s |\n",
                m.spec.preset->name.c_str(), *m.tokens_per_s, *m.model_tflops,
                percent(r.mfu(m)).c_str(), percent(r.hfu(m)).c_str(),
                ratio ? format("%.3fx", *ratio).c_str() : "-",
                speedup ? format("%.3fx", *speedup).c_str() : "-",
                trainer::format_bytes(m.peak_bytes[static_cast<size_t>(MemoryCategory::activation)])
                    .c_str(),
                trainer::format_bytes(m.predicted_activation_peak).c_str(),
                trainer::format_bytes(m.peak_live_bytes).c_str(),
                trainer::format_bytes(m.peak_reserved_bytes).c_str());
  }
  std::printf(
      "vs none: over `none` of the same attention backend; vs unf.: a flash preset over "
      "its unfused twin\n");
  std::printf("targets (unfused attention):\n");
  for (const Target& t : targets(r)) {
    std::printf("  %-40s %8s (target >= %s): %s\n", t.name.c_str(),
                t.value ? format("%.3f", *t.value).c_str() : "-",
                format("%.2f", t.threshold).c_str(),
                !t.value                  ? "not measured"
                : *t.value >= t.threshold ? "met"
                                          : "NOT met");
  }
  for (const std::string& what : r.skipped_for_time)
    std::printf("skipped for --time-limit-s: %s\n", what.c_str());
  if (r.sweep.empty()) return;
  std::printf("longest sequence within %g GiB of live allocator blocks (micro batch 1):\n",
              r.options.budget_gib);
  for (size_t p = 0; p < r.sweep.size(); ++p) {
    const std::optional<int64_t> longest = longest_fitting(r.sweep[p], r.budget_bytes());
    std::printf("  %-25s %6s:", presets()[p].name.c_str(),
                longest ? std::to_string(*longest).c_str() : "-");
    for (const Measurement& m : r.sweep[p]) {
      std::printf(" %lld %s (%s)", static_cast<long long>(m.spec.seq_length),
                  outcome_name(outcome_of(m, r.budget_bytes())),
                  trainer::format_bytes(m.peak_live_block_bytes).c_str());
    }
    std::printf("\n");
  }
}

}  // namespace bench_gpu
