// Next-token choice (greedy, temperature, top-k) with Philox draws, and the generation loop.
// Ties and sums run in id order, in double, so a draw is the same on every machine.
#include "trainer/generate/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/allocator.h"
#include "runtime/error.h"
#include "runtime/ops.h"
#include "runtime/philox.h"

namespace trainer {
namespace {

// A uniform double in [0, 1) for draw `step` under `seed`: 53 bits of one Philox block.
double uniform_draw(uint64_t seed, int64_t step) {
  const uint64_t key = runtime::splitmix64(seed ^ 0x5a3b1e5eedull);
  const auto index = static_cast<uint64_t>(step);
  const runtime::Philox4x32 bits = runtime::philox4x32_10(
      {{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0x9e7e, 0}},
      static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  const uint64_t word = (static_cast<uint64_t>(bits.v[0]) << 32 | bits.v[1]) >> 11;
  return static_cast<double>(word) * 0x1.0p-53;
}

}  // namespace

void check_sampling_options(const SamplingOptions& options) {
  if (!(options.temperature >= 0.f) || !std::isfinite(options.temperature)) {
    throw runtime::InputError(
        TRAINER_STR("generate: --temperature " << options.temperature << " must be >= 0"));
  }
  if (options.top_k < 0) {
    throw runtime::InputError(
        TRAINER_STR("generate: --top-k " << options.top_k << " must be >= 0 (0: no limit)"));
  }
  if (options.max_new_tokens < 1) {
    throw runtime::InputError(
        TRAINER_STR("generate: --max-new-tokens " << options.max_new_tokens << " must be >= 1"));
  }
}

int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, int64_t step) {
  const auto vocab = static_cast<int64_t>(logits.size());
  TRAINER_ASSERT(vocab > 0, "no logits");
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  // Largest logit first, the lower id first on ties.
  auto before = [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  };
  if (options.temperature == 0.f) return *std::min_element(ids.begin(), ids.end(), before);
  const int64_t kept = options.top_k > 0 ? std::min(options.top_k, vocab) : vocab;
  std::partial_sort(ids.begin(), ids.begin() + kept, ids.end(), before);
  ids.resize(static_cast<size_t>(kept));
  std::sort(ids.begin(), ids.end());  // sums in id order
  const double max = logits[static_cast<size_t>(*std::min_element(ids.begin(), ids.end(), before))];
  std::vector<double> weights;
  double total = 0;
  for (const int32_t id : ids) {
    weights.push_back(std::exp((logits[static_cast<size_t>(id)] - max) / options.temperature));
    total += weights.back();
  }
  const double target = uniform_draw(options.seed, step) * total;
  double cumulative = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    cumulative += weights[i];
    if (target < cumulative) return ids[i];
  }
  return ids.back();  // rounding left the target at the very top
}

std::vector<int32_t> generate_tokens(model::Decoder& decoder, std::span<const int32_t> prompt,
                                     const SamplingOptions& options) {
  TRAINER_ASSERT(!prompt.empty(), "an empty prompt");
  const auto prompt_length = static_cast<int64_t>(prompt.size());
  model::KvCache cache = decoder.new_cache(prompt_length + options.max_new_tokens);
  const int64_t vocab = decoder.config().vocab_size;
  runtime::Tensor logits = decoder.forward(cache, prompt);
  // The last position's logits on the host (downloaded from a device).
  runtime::CpuAllocator host;
  const runtime::Tensor last_row = runtime::Tensor::empty(
      host, {logits.dim(1)}, runtime::DType::f32, runtime::MemoryCategory::workspace);
  std::vector<int32_t> generated;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const runtime::Tensor last = logits.view((logits.dim(0) - 1) * logits.dim(1), {logits.dim(1)});
    if (last.device() != runtime::DeviceKind::cpu) runtime::ops::download(last_row, last);
    const float* values = last.device() == runtime::DeviceKind::cpu ? last.f32() : last_row.f32();
    const int32_t token =
        sample_token(std::span(values, static_cast<size_t>(vocab)), options, step);
    generated.push_back(token);
    if (options.stop_id && token == *options.stop_id) break;
    if (step + 1 < options.max_new_tokens) logits = decoder.forward(cache, std::span(&token, 1));
  }
  return generated;
}

}  // namespace trainer
