// The order-2 Markov synthetic corpus: chain, exact stationary law and entropies, stream
// sampling, <prefix>.json sidecar. Rules: only IEEE +, *, / and integer hashing decide the
// tokens (no libm, no std distributions), so a spec gives the same tokens on every machine.
#include "trainer/data/synthetic.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "runtime/error.h"
#include "runtime/philox.h"
#include "trainer/data/dataset_metadata.h"
#include "trainer/data/splitmix_stream.h"

namespace trainer {
namespace {

constexpr uint64_t kChainDomain = 0x4348414931ull;   // keys the chain's construction
constexpr uint64_t kStreamDomain = 0x5354524D31ull;  // keys the token stream
constexpr double kStationaryTolerance = 1e-15;       // L1 change between power iterations
constexpr double kMaxPowerIterationWork = 1e10;  // multiply-adds (a few seconds) before giving up

void validate(const SyntheticCorpusSpec& spec) {
  const auto max_alphabet = static_cast<int>(kSyntheticAlphabet.size());
  if (spec.alphabet < 2 || spec.alphabet > max_alphabet) {
    throw runtime::InputError(TRAINER_STR("synthetic corpus: alphabet = " << spec.alphabet
                                                                          << " must be in [2, "
                                                                          << max_alphabet << "]"));
  }
  if (spec.branching < 1 || spec.branching > spec.alphabet) {
    throw runtime::InputError(TRAINER_STR(
        "synthetic corpus: branching = " << spec.branching
                                         << " must be in [1, alphabet = " << spec.alphabet << "]"));
  }
  if (!(spec.uniform_mix > 0 && spec.uniform_mix <= 1)) {
    throw runtime::InputError(TRAINER_STR(
        "synthetic corpus: uniform_mix = " << spec.uniform_mix << " must be in (0, 1]"));
  }
  if (spec.num_tokens < 3) {
    throw runtime::InputError(
        TRAINER_STR("synthetic corpus: num_tokens = " << spec.num_tokens << " must be >= 3"));
  }
}

// P(c | a, b) = (1 - mix) * sparse_ab(c) + mix / A, where sparse_ab puts decreasing
// random weights w_0 = 1, w_k = w_{k-1} * U[0.25, 0.75) on `branching` distinct
// successors drawn (partial Fisher-Yates) from a pool of 2 x branching symbols
// that depends on b alone. The pool makes the previous token informative on its
// own (H1 well below H0), so a model learns the chain in two visible stages:
// bigram statistics first, then the pair context through attention.
std::vector<double> build_transition(const SyntheticCorpusSpec& spec) {
  const int A = spec.alphabet;
  const int pool_size = std::min(A, 2 * spec.branching);
  std::vector<double> transition(static_cast<size_t>(A) * A * A);
  SplitMix64Stream stream(runtime::splitmix64(spec.seed ^ kChainDomain));
  std::vector<int> symbols(static_cast<size_t>(A));
  std::vector<std::vector<int>> pools(static_cast<size_t>(A));
  for (std::vector<int>& pool : pools) {
    std::iota(symbols.begin(), symbols.end(), 0);
    for (int k = 0; k < pool_size; ++k) {
      std::swap(symbols[k],
                symbols[k + static_cast<int>(stream.below(static_cast<uint64_t>(A - k)))]);
    }
    pool.assign(symbols.begin(), symbols.begin() + pool_size);
  }
  std::vector<double> weights(static_cast<size_t>(spec.branching));
  const double floor = spec.uniform_mix / A;
  for (int context = 0; context < A * A; ++context) {
    std::vector<int> pool = pools[static_cast<size_t>(context % A)];  // b = context % A
    double weight = 1, weight_sum = 0;
    for (int k = 0; k < spec.branching; ++k) {
      const auto pick = k + static_cast<int>(stream.below(static_cast<uint64_t>(pool_size - k)));
      std::swap(pool[k], pool[pick]);
      if (k > 0) weight *= 0.25 + 0.5 * stream.uniform();
      weights[k] = weight;
      weight_sum += weight;
    }
    double* row = transition.data() + static_cast<size_t>(context) * A;
    std::fill(row, row + A, floor);
    for (int k = 0; k < spec.branching; ++k) {
      row[pool[k]] += (1 - spec.uniform_mix) * (weights[k] / weight_sum);
    }
  }
  return transition;
}

// Power iteration on the pair chain (a, b) -> (b, c) from the uniform law; the uniform
// mix makes it irreducible and aperiodic, so it converges to the unique stationary law.
std::vector<double> stationary_pairs(int A, const std::vector<double>& transition,
                                     double uniform_mix) {
  const size_t pairs = static_cast<size_t>(A) * A;
  std::vector<double> law(pairs, 1.0 / static_cast<double>(pairs)), next(pairs);
  const auto max_iterations = static_cast<int64_t>(kMaxPowerIterationWork / (double(A) * A * A));
  double change = 0;
  for (int64_t iteration = 0; iteration < max_iterations; ++iteration) {
    std::fill(next.begin(), next.end(), 0.0);
    for (int b = 0; b < A; ++b) {
      double* out = next.data() + static_cast<size_t>(b) * A;
      for (int a = 0; a < A; ++a) {
        const double mass = law[static_cast<size_t>(a) * A + b];
        const double* row = transition.data() + (static_cast<size_t>(a) * A + b) * A;
        for (int c = 0; c < A; ++c) out[c] += mass * row[c];
      }
    }
    change = 0;
    for (size_t i = 0; i < pairs; ++i) change += std::fabs(next[i] - law[i]);
    law.swap(next);
    if (change < kStationaryTolerance) return law;
  }
  throw runtime::InputError(TRAINER_STR("synthetic corpus: the stationary law did not converge in "
                                        << max_iterations << " power iterations (last L1 change "
                                        << change << "); uniform_mix = " << uniform_mix
                                        << " mixes too slowly, use a larger one"));
}

double entropy_of(const double* probabilities, size_t count) {
  double entropy = 0;
  for (size_t i = 0; i < count; ++i) {
    if (probabilities[i] > 0) entropy -= probabilities[i] * std::log(probabilities[i]);
  }
  return entropy;
}

SyntheticEntropy chain_entropy(int A, const std::vector<double>& transition,
                               const std::vector<double>& stationary) {
  std::vector<double> first(static_cast<size_t>(A), 0.0), second(static_cast<size_t>(A), 0.0);
  double rate = 0;
  for (int a = 0; a < A; ++a) {
    for (int b = 0; b < A; ++b) {
      const size_t pair = static_cast<size_t>(a) * A + b;
      first[a] += stationary[pair];
      second[b] += stationary[pair];
      rate += stationary[pair] * entropy_of(transition.data() + pair * A, static_cast<size_t>(A));
    }
  }
  SyntheticEntropy entropy;
  entropy.marginal = entropy_of(second.data(), second.size());
  // H(X_t | X_{t-1}) = H(X_{t-1}, X_t) - H(X_{t-1}).
  entropy.order1 =
      entropy_of(stationary.data(), stationary.size()) - entropy_of(first.data(), first.size());
  entropy.rate = rate;
  return entropy;
}

// Inverse-CDF tables: each context lists its symbols by decreasing probability, so a
// draw usually stops within the first `branching` entries.
struct SamplingTable {
  std::vector<double> cdf;  // (A * A, A)
  std::vector<int> symbol;  // (A * A, A): the symbol of that CDF entry
};

SamplingTable build_sampling_table(int A, const std::vector<double>& transition) {
  SamplingTable table;
  table.cdf.resize(transition.size());
  table.symbol.resize(transition.size());
  std::vector<int> order(static_cast<size_t>(A));
  for (size_t context = 0; context < static_cast<size_t>(A) * A; ++context) {
    const double* row = transition.data() + context * A;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return row[x] > row[y]; });
    double cumulative = 0;
    for (int k = 0; k < A; ++k) {
      cumulative += row[order[k]];
      table.cdf[context * A + k] = cumulative;
      table.symbol[context * A + k] = order[k];
    }
  }
  return table;
}

// First k with u < cdf[k]; the last entry absorbs rounding (cdf[count - 1] may be 1 - ulp).
int draw(const double* cdf, int count, double u) {
  for (int k = 0; k < count - 1; ++k) {
    if (u < cdf[k]) return k;
  }
  return count - 1;
}

}  // namespace

SyntheticChain make_synthetic_chain(const SyntheticCorpusSpec& spec) {
  validate(spec);
  SyntheticChain chain;
  chain.alphabet = spec.alphabet;
  chain.transition = build_transition(spec);
  chain.stationary = stationary_pairs(spec.alphabet, chain.transition, spec.uniform_mix);
  chain.entropy = chain_entropy(spec.alphabet, chain.transition, chain.stationary);
  return chain;
}

SyntheticCorpus make_synthetic_corpus(const SyntheticCorpusSpec& spec) {
  const SyntheticChain chain = make_synthetic_chain(spec);
  const int A = chain.alphabet;
  const SamplingTable table = build_sampling_table(A, chain.transition);
  SplitMix64Stream stream(runtime::splitmix64(spec.seed ^ kStreamDomain));

  // The start pair comes from the stationary law, so the stream is stationary from token 0.
  std::vector<double> pair_cdf(chain.stationary.size());
  std::partial_sum(chain.stationary.begin(), chain.stationary.end(), pair_cdf.begin());
  const int start = draw(pair_cdf.data(), A * A, stream.uniform());

  SyntheticCorpus corpus;
  corpus.entropy = chain.entropy;
  corpus.tokens.resize(static_cast<size_t>(spec.num_tokens));
  int previous = start / A, current = start % A;  // symbols
  corpus.tokens[0] = static_cast<unsigned char>(kSyntheticAlphabet[previous]);
  corpus.tokens[1] = static_cast<unsigned char>(kSyntheticAlphabet[current]);
  for (int64_t t = 2; t < spec.num_tokens; ++t) {
    const size_t context = static_cast<size_t>(previous) * A + current;
    const int k = draw(table.cdf.data() + context * A, A, stream.uniform());
    const int symbol = table.symbol[context * A + k];
    corpus.tokens[t] = static_cast<unsigned char>(kSyntheticAlphabet[symbol]);
    previous = current;
    current = symbol;
  }
  return corpus;
}

tokenizer::TokenizerIdentity synthetic_tokenizer() {
  tokenizer::TokenizerIdentity identity;
  identity.kind = "byte";
  identity.vocab_size = 256;
  return identity;
}

void write_synthetic_metadata(const std::string& prefix, const SyntheticCorpusSpec& spec,
                              const SyntheticEntropy& entropy) {
  const std::string path = prefix + ".json";
  const std::string temporary = path + ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "w");
  if (file == nullptr) {
    throw runtime::InputError(
        TRAINER_STR("cannot create " << temporary << ": " << std::strerror(errno)));
  }
  const int written = std::fprintf(
      file,
      "{\n  \"tokenizer\": %s,\n  \"generator\": \"order2_markov\",\n  \"seed\": %" PRIu64
      ",\n  \"num_tokens\": %" PRId64
      ",\n  \"alphabet\": %d,\n  \"branching\": %d,\n  \"uniform_mix\": %.17g,\n"
      "  \"entropy_marginal_nats\": %.17g,\n  \"entropy_order1_nats\": %.17g,\n"
      "  \"entropy_rate_nats\": %.17g\n}\n",
      tokenizer_identity_json(synthetic_tokenizer()).c_str(), spec.seed, spec.num_tokens,
      spec.alphabet, spec.branching, spec.uniform_mix, entropy.marginal, entropy.order1,
      entropy.rate);
  const bool closed = std::fclose(file) == 0;
  if (written < 0 || !closed || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw runtime::LibraryError(
        TRAINER_STR("writing " << path << " failed: " << std::strerror(errno)));
  }
}

bool read_synthetic_metadata(const std::string& prefix, SyntheticEntropy* entropy) {
  const std::string path = prefix + ".json";
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored)) return false;
  const char* field = "";
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap()) {
      throw runtime::InputError(TRAINER_STR(path << ": synthetic metadata is not a JSON object"));
    }
    field = "generator";
    const YAML::Node generator = root["generator"];
    if (!generator && root["tokenizer"]) return false;  // a tokenized corpus: no known floor
    if (!generator || generator.as<std::string>() != "order2_markov") {
      throw runtime::InputError(TRAINER_STR(
          path << ": \"generator\" is "
               << (generator ? '"' + generator.as<std::string>() + '"' : std::string("missing"))
               << ", expected \"order2_markov\""));
    }
    auto number = [&](const char* name) {
      field = name;
      const YAML::Node node = root[name];
      if (!node || !node.IsScalar()) {
        throw runtime::InputError(TRAINER_STR(path << ": \"" << name << "\" is missing"));
      }
      const auto value = node.as<double>();
      if (!std::isfinite(value) || value < 0) {
        throw runtime::InputError(TRAINER_STR(path << ": \"" << name << "\" = " << value
                                                   << " is not a finite entropy >= 0"));
      }
      return value;
    };
    SyntheticEntropy parsed;
    parsed.marginal = number("entropy_marginal_nats");
    parsed.order1 = number("entropy_order1_nats");
    parsed.rate = number("entropy_rate_nats");
    *entropy = parsed;
    return true;
  } catch (const YAML::Exception& error) {
    throw runtime::InputError(TRAINER_STR(path << ": malformed synthetic metadata (field \""
                                               << field << "\"): " << error.what()));
  }
}

}  // namespace trainer
