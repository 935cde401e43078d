// Document-masking benchmark (data.reset_attention_mask, Megatron's --reset-attention-mask):
// tokens/s of one Llama-shaped model under flash attention when each sequence packs documents of
// a fixed length, side by side with one document per sequence (the same tokens, no mask), and
// each run's activation peak. Flash skips the key tiles before a query tile's document, so
// attention costs about T x L rather than T^2 / 2. And the step-time model against the masked
// run's measured step: each run plans with a profile calibrated just before it (the masked one
// with the run's documents, Note [Timed documents] in trainer/planning/calibrate.cpp), and the
// unmasked run's prediction is what the masked run was predicted when attention was timed
// without its documents. JSON out. Numbers are not asserted.
// usage: bench_documents [OUT_JSON]
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "runtime/openmp_wait.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/synthetic.h"
#include "trainer/planning/calibrate.h"
#include "trainer/util/format_bytes.h"

namespace {

constexpr bench::ModelShape kModel = {
    .num_layers = 4, .hidden_size = 256, .num_attention_heads = 4, .vocab_size = 256};
constexpr int32_t kEod = 255;  // never in the synthetic text: the documents are where we put it
constexpr int kWarmupSteps = 1, kTimedSteps = 3;

// The synthetic corpus with an eod as the last token of every `length` tokens (0: none), so that
// every sequence (which starts at a multiple of its length) packs documents of `length` tokens.
void write_documents(const std::string& prefix, int64_t length) {
  trainer::SyntheticCorpusSpec spec;
  spec.num_tokens = bench::kDatasetTokens;
  std::vector<int32_t> tokens = trainer::make_synthetic_corpus(spec).tokens;
  if (length > 0) {
    for (size_t i = static_cast<size_t>(length) - 1; i < tokens.size();
         i += static_cast<size_t>(length))
      tokens[i] = kEod;
  }
  trainer::IndexedDatasetWriter writer(prefix, trainer::TokenDType::uint16);
  writer.add_document(tokens);
  writer.finish();
}

// The run at `seq` over the documents of `length` (masked when `masked`): micro batch 1, fp32 on
// the host, flash, no recompute.
std::vector<std::string> overrides_of(int64_t seq, int64_t length, bool masked,
                                      const bench::WorkDir& work) {
  bench::ModelShape shape = kModel;
  shape.seq_length = seq;
  std::vector<std::string> overrides =
      bench::llama_flash_overrides(work, shape, kWarmupSteps + kTimedSteps);
  overrides.push_back("data.path=" + work / ("documents_" + std::to_string(length)));
  if (masked)
    overrides.insert(overrides.end(),
                     {"data.reset_attention_mask=true", bench::set("data.eod_id", kEod)});
  return overrides;
}

// `overrides` planning with a profile calibrated now at their shapes (with their documents when
// they mask them): a short calibration (1 warm-up round, the median of 3).
std::vector<std::string> with_profile(std::vector<std::string> overrides, const std::string& path) {
  const trainer::Config config = trainer::parse_config("", "bench", overrides);
  runtime::CpuAllocator allocator;
  trainer::CalibrationOptions options{.warmup = 1, .repeats = 3, .min_seconds = 0};
  options.document_starts = trainer::calibration_documents(config);
  trainer::write_time_profile(trainer::calibrate(config, allocator, options), path);
  overrides.push_back("train.time_profile=" + path);
  return overrides;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::choose_openmp_wait_policy(argv);
  const std::string out_path = argc > 1 ? argv[1] : "bench/documents.json";
  bench::print_llama_flash_model(kModel, "documents of 2048, 512 and 128 tokens", kWarmupSteps,
                                 kTimedSteps);
  const bench::WorkDir work("bench-documents");
  const std::vector<int64_t> lengths = {2048, 512, 128};
  for (const int64_t length : lengths)
    write_documents(work / ("documents_" + std::to_string(length)), length);
  std::printf("| %6s | %8s | %15s | %15s | %8s | %12s | %12s | %11s | %16s | %16s |\n", "seq",
              "document", "unmasked tok/s", "masked tok/s", "speedup", "unmasked peak",
              "masked peak", "masked ms", "predicted, docs", "untimed docs");
  std::ofstream json(out_path);
  json << "{\"rows\": [";
  const char* separator = "";
  for (const int64_t seq : {4096, 8192}) {
    for (const int64_t length : lengths) {
      const bench::StepResult plain = bench::run_on_host(
          with_profile(overrides_of(seq, length, false, work), work / "plain.json"), kWarmupSteps,
          kTimedSteps);
      const bench::StepResult masked = bench::run_on_host(
          with_profile(overrides_of(seq, length, true, work), work / "masked.json"), kWarmupSteps,
          kTimedSteps);
      const double p = bench::tokens_per_s(seq, plain), m = bench::tokens_per_s(seq, masked);
      auto error = [&](double predicted) { return 100 * (predicted / masked.step_ms - 1); };
      std::printf(
          "| %6lld | %8lld | %15.0f | %15.0f | %7.2fx | %12s | %12s | %11.1f | %7.1f (%+4.0f%%) | "
          "%7.1f (%+4.0f%%) |\n",
          static_cast<long long>(seq), static_cast<long long>(length), p, m, m / p,
          trainer::format_bytes(plain.activation_peak).c_str(),
          trainer::format_bytes(masked.activation_peak).c_str(), masked.step_ms,
          masked.predicted_step_ms, error(masked.predicted_step_ms), plain.predicted_step_ms,
          error(plain.predicted_step_ms));
      std::fflush(stdout);
      json << separator << "{\"seq_length\": " << seq << ", \"document_length\": " << length
           << ", \"unmasked_tokens_per_s\": " << p << ", \"masked_tokens_per_s\": " << m
           << ", \"unmasked_activation_peak_bytes\": " << plain.activation_peak
           << ", \"masked_activation_peak_bytes\": " << masked.activation_peak
           << ", \"masked_step_ms\": " << masked.step_ms
           << ", \"masked_predicted_step_ms\": " << masked.predicted_step_ms
           << ", \"unmasked_step_ms\": " << plain.step_ms
           << ", \"unmasked_predicted_step_ms\": " << plain.predicted_step_ms << "}";
      separator = ", ";
    }
  }
  json << "]}\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
