// Synthetic order-2 Markov corpus: determinism, a proper chain and stationary law,
// closed-form entropies, empirical entropies of a long stream, and the sidecar.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "data_test_util.h"
#include "trainer/data/synthetic.h"

namespace trainer {
namespace {

using testing::input_error_of;
using testing::ScratchDir;
using testing::write_text;

TEST(Synthetic, SameSpecSameTokens) {
  SyntheticCorpusSpec spec;
  spec.num_tokens = 100'000;
  const SyntheticCorpus first = make_synthetic_corpus(spec);
  const SyntheticCorpus second = make_synthetic_corpus(spec);
  ASSERT_EQ(first.tokens.size(), 100'000u);
  EXPECT_EQ(first.tokens, second.tokens);
  EXPECT_EQ(first.entropy.rate, second.entropy.rate);
  spec.seed += 1;
  EXPECT_NE(make_synthetic_corpus(spec).tokens, first.tokens);
  // A longer stream of the same spec starts with the shorter one.
  spec.seed -= 1;
  spec.num_tokens = 120'000;
  const SyntheticCorpus longer = make_synthetic_corpus(spec);
  EXPECT_TRUE(std::equal(first.tokens.begin(), first.tokens.end(), longer.tokens.begin()));
}

// Pins the chain and stream recipe: a corpus prepared elsewhere, or by an older
// build, must be the corpus its sidecar describes.
TEST(Synthetic, DefaultSpecIsPinned) {
  SyntheticCorpusSpec spec;
  spec.num_tokens = 40;
  const SyntheticCorpus corpus = make_synthetic_corpus(spec);
  EXPECT_EQ(std::string(corpus.tokens.begin(), corpus.tokens.end()),
            "tvp,dnct?qcprnczhhz .!qovrqcp?qpdbhqfnrd");
  EXPECT_NEAR(corpus.entropy.rate, 1.2286679584197677, 1e-12);
  EXPECT_NEAR(corpus.entropy.order1, 1.9818368559186439, 1e-12);
  EXPECT_NEAR(corpus.entropy.marginal, 3.3460597109830044, 1e-12);
}

// The start pair is drawn from the stationary law: for an i.i.d. uniform chain the
// first token of many streams is uniform over the alphabet.
TEST(Synthetic, StreamStartsFromTheStationaryLaw) {
  SyntheticCorpusSpec spec;
  spec.alphabet = 4;
  spec.branching = 1;
  spec.uniform_mix = 1;
  spec.num_tokens = 3;
  std::map<int32_t, int> first_tokens;
  constexpr int kStreams = 2000;
  for (int seed = 0; seed < kStreams; ++seed) {
    spec.seed = static_cast<uint64_t>(seed);
    ++first_tokens[make_synthetic_corpus(spec).tokens[0]];
  }
  ASSERT_EQ(first_tokens.size(), 4u);
  for (const auto& [token, count] : first_tokens) {
    EXPECT_NEAR(count, kStreams / 4, 120) << "token " << token;  // sd 19
  }
}

TEST(Synthetic, TokensAreTheFirstAlphabetBytes) {
  SyntheticCorpusSpec spec;
  spec.alphabet = 5;
  spec.branching = 2;
  spec.num_tokens = 20'000;
  std::map<int32_t, int64_t> seen;
  for (const int32_t token : make_synthetic_corpus(spec).tokens) ++seen[token];
  ASSERT_EQ(seen.size(), 5u);  // the uniform mix reaches every symbol
  for (int s = 0; s < 5; ++s) EXPECT_EQ(seen.count(kSyntheticAlphabet[s]), 1u) << s;
  EXPECT_EQ(kSyntheticAlphabet.size(), 95u);
  for (const char byte : kSyntheticAlphabet) EXPECT_TRUE(byte >= 32 && byte < 127);
  EXPECT_EQ(std::set<char>(kSyntheticAlphabet.begin(), kSyntheticAlphabet.end()).size(), 95u);
}

TEST(Synthetic, ChainRowsAndStationaryLaw) {
  SyntheticCorpusSpec spec;
  const SyntheticChain chain = make_synthetic_chain(spec);
  const int A = chain.alphabet;
  ASSERT_EQ(A, 32);
  ASSERT_EQ(chain.transition.size(), static_cast<size_t>(A * A * A));
  for (int context = 0; context < A * A; ++context) {
    double sum = 0;
    int likely = 0;
    for (int c = 0; c < A; ++c) {
      const double p = chain.transition[context * A + c];
      EXPECT_GE(p, spec.uniform_mix / A * (1 - 1e-12));
      likely += p > spec.uniform_mix / A * 1.5;
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12) << "context " << context;
    EXPECT_EQ(likely, spec.branching) << "context " << context;
  }
  double total = 0;
  for (const double p : chain.stationary) total += p;
  EXPECT_NEAR(total, 1.0, 1e-13);
  // pi(b, c) = sum_a pi(a, b) P(c | a, b).
  double max_residual = 0;
  for (int b = 0; b < A; ++b) {
    for (int c = 0; c < A; ++c) {
      double next = 0;
      for (int a = 0; a < A; ++a) {
        next += chain.stationary[a * A + b] * chain.transition[(a * A + b) * A + c];
      }
      max_residual = std::max(max_residual, std::fabs(next - chain.stationary[b * A + c]));
    }
  }
  EXPECT_LT(max_residual, 1e-15);
  // The entropies are those of this law: H(X_t), H(X_{t-1}, X_t) - H(X_{t-1}), and
  // sum_ab pi(a, b) H(P(. | a, b)).
  auto plogp = [](double p) { return p > 0 ? -p * std::log(p) : 0.0; };
  std::vector<double> marginal(A, 0.0);
  double pair_entropy = 0, rate = 0, marginal_entropy = 0;
  for (int a = 0; a < A; ++a) {
    for (int b = 0; b < A; ++b) {
      const double pi = chain.stationary[a * A + b];
      marginal[b] += pi;
      pair_entropy += plogp(pi);
      double row_entropy = 0;
      for (int c = 0; c < A; ++c) row_entropy += plogp(chain.transition[(a * A + b) * A + c]);
      rate += pi * row_entropy;
    }
  }
  for (const double p : marginal) marginal_entropy += plogp(p);
  const SyntheticEntropy& h = chain.entropy;
  EXPECT_NEAR(h.marginal, marginal_entropy, 1e-12);
  EXPECT_NEAR(h.order1, pair_entropy - marginal_entropy, 1e-12);
  EXPECT_NEAR(h.rate, rate, 1e-12);
  EXPECT_GT(h.rate, 1.0);  // the defaults sit in the learnable 1.0-1.6 nat band
  EXPECT_LT(h.rate, 1.6);
  EXPECT_LT(h.rate, h.order1);
  EXPECT_LT(h.order1, h.marginal);
  EXPECT_LE(h.marginal, std::log(32.0) + 1e-12);
}

TEST(Synthetic, ClosedFormEntropies) {
  SyntheticCorpusSpec spec;
  spec.num_tokens = 10;
  spec.uniform_mix = 1;  // i.i.d. uniform
  SyntheticEntropy h = make_synthetic_chain(spec).entropy;
  EXPECT_NEAR(h.marginal, std::log(32.0), 1e-12);
  EXPECT_NEAR(h.order1, std::log(32.0), 1e-12);
  EXPECT_NEAR(h.rate, std::log(32.0), 1e-12);

  // branching 1: every row is one likely symbol plus the floor, whatever the law.
  spec.alphabet = 10;
  spec.branching = 1;
  spec.uniform_mix = 0.3;
  const double floor = 0.3 / 10, top = 0.7 + floor;
  const double row_entropy = -top * std::log(top) - 9 * floor * std::log(floor);
  h = make_synthetic_chain(spec).entropy;
  EXPECT_NEAR(h.rate, row_entropy, 1e-12);
}

TEST(Synthetic, LossFloorFormula) {
  const SyntheticEntropy h{3.0, 2.0, 1.0};
  EXPECT_DOUBLE_EQ(h.loss_floor(1), 2.0);
  EXPECT_DOUBLE_EQ(h.loss_floor(4), (2.0 + 3 * 1.0) / 4);
  EXPECT_DOUBLE_EQ(h.loss_floor(128), (2.0 + 127.0) / 128);
}

// Plug-in entropy of counts, with the Miller-Madow correction (observed cells - 1) / 2N
// so the estimator's O(1/N) downward bias does not eat into the tolerance.
double conditional_entropy(const std::vector<int64_t>& joint, int64_t contexts, int64_t symbols) {
  double entropy = 0;
  int64_t total = 0;
  for (int64_t context = 0; context < contexts; ++context) {
    int64_t context_count = 0, observed = 0;
    for (int64_t s = 0; s < symbols; ++s) context_count += joint[context * symbols + s];
    for (int64_t s = 0; s < symbols; ++s) {
      const int64_t n = joint[context * symbols + s];
      if (n == 0) continue;
      ++observed;
      entropy -= static_cast<double>(n) * std::log(static_cast<double>(n) / context_count);
    }
    if (observed > 0) entropy += (observed - 1) / 2.0;
    total += context_count;
  }
  return entropy / static_cast<double>(total);
}

TEST(Synthetic, EmpiricalEntropiesOfA2MTokenStreamMatch) {
  SyntheticCorpusSpec spec;
  spec.num_tokens = 2'000'000;
  const SyntheticCorpus corpus = make_synthetic_corpus(spec);
  const int A = spec.alphabet;
  std::vector<int> symbol_of(256, -1);
  for (int s = 0; s < A; ++s) symbol_of[static_cast<unsigned char>(kSyntheticAlphabet[s])] = s;
  std::vector<int64_t> unigram(A, 0), bigram(A * A, 0), trigram(A * A * A, 0);
  std::vector<int> symbols(corpus.tokens.size());
  for (size_t t = 0; t < corpus.tokens.size(); ++t) {
    symbols[t] = symbol_of[corpus.tokens[t]];
    ASSERT_GE(symbols[t], 0) << "token " << corpus.tokens[t] << " outside the alphabet";
  }
  for (size_t t = 2; t < symbols.size(); ++t) {
    ++unigram[symbols[t]];
    ++bigram[symbols[t - 1] * A + symbols[t]];
    ++trigram[(symbols[t - 2] * A + symbols[t - 1]) * A + symbols[t]];
  }
  const SyntheticEntropy& h = corpus.entropy;
  EXPECT_NEAR(conditional_entropy(trigram, A * A, A), h.rate, 0.01);
  // The true model's mean log loss on the stream estimates the rate without bias
  // (standard error ~0.001 nats here).
  const SyntheticChain chain = make_synthetic_chain(spec);
  double log_loss = 0;
  for (size_t t = 2; t < symbols.size(); ++t) {
    log_loss -= std::log(chain.transition[(symbols[t - 2] * A + symbols[t - 1]) * A + symbols[t]]);
  }
  EXPECT_NEAR(log_loss / static_cast<double>(symbols.size() - 2), h.rate, 0.004);
  EXPECT_NEAR(conditional_entropy(bigram, A, A), h.order1, 0.01);
  EXPECT_NEAR(conditional_entropy(unigram, 1, A), h.marginal, 0.01);
}

TEST(Synthetic, SpecValidationNamesFieldAndValue) {
  auto message_for = [](auto change) {
    SyntheticCorpusSpec spec;
    change(spec);
    return input_error_of([&] { make_synthetic_corpus(spec); });
  };
  EXPECT_NE(message_for([](auto& s) { s.alphabet = 1; }).find("alphabet = 1"), std::string::npos);
  EXPECT_NE(message_for([](auto& s) { s.alphabet = 96; }).find("alphabet = 96"), std::string::npos);
  EXPECT_NE(message_for([](auto& s) { s.branching = 0; }).find("branching = 0"), std::string::npos);
  EXPECT_NE(message_for([](auto& s) { s.branching = 33; }).find("branching = 33"),
            std::string::npos);
  EXPECT_NE(message_for([](auto& s) { s.uniform_mix = 0; }).find("uniform_mix = 0"),
            std::string::npos);
  EXPECT_NE(message_for([](auto& s) { s.uniform_mix = 1.5; }).find("uniform_mix = 1.5"),
            std::string::npos);
  EXPECT_NE(message_for([](auto& s) { s.uniform_mix = std::nan(""); }).find("uniform_mix"),
            std::string::npos);
  EXPECT_NE(message_for([](auto& s) { s.num_tokens = 2; }).find("num_tokens = 2"),
            std::string::npos);
}

TEST(Synthetic, MetadataRoundTripsAtFullPrecision) {
  ScratchDir dir;
  const std::string prefix = dir.path("synthetic");
  SyntheticEntropy read;
  EXPECT_FALSE(read_synthetic_metadata(prefix, &read));

  SyntheticCorpusSpec spec;
  spec.seed = 18446744073709551615ull;
  spec.uniform_mix = 0.1;
  const SyntheticEntropy written{3.4587643218765432, 3.2120650000000001, 1.2260431234567891};
  write_synthetic_metadata(prefix, spec, written);
  ASSERT_TRUE(read_synthetic_metadata(prefix, &read));
  EXPECT_EQ(read.marginal, written.marginal);
  EXPECT_EQ(read.order1, written.order1);
  EXPECT_EQ(read.rate, written.rate);
  const auto bytes = testing::read_bytes(prefix + ".json");
  const std::string text(bytes.begin(), bytes.end());
  EXPECT_NE(text.find("\"generator\": \"order2_markov\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"seed\": 18446744073709551615"), std::string::npos) << text;
  EXPECT_NE(text.find("\"uniform_mix\": 0.10000000000000001"), std::string::npos) << text;
}

TEST(Synthetic, MalformedMetadataIsAnInputError) {
  ScratchDir dir;
  const std::string prefix = dir.path("bad");
  SyntheticEntropy entropy;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"generator\": \"order2_markov\", \"entropy_rate_nats\": ", "malformed"},
      {"[1, 2]", "not a JSON object"},
      {"{\"generator\": \"other\"}", "\"other\""},
      {"{\"entropy_rate_nats\": 1}", "missing"},
      {"{\"generator\": \"order2_markov\", \"entropy_marginal_nats\": 3, "
       "\"entropy_order1_nats\": 2}",
       "entropy_rate_nats"},
      {"{\"generator\": \"order2_markov\", \"entropy_marginal_nats\": 3, "
       "\"entropy_order1_nats\": \"two\", \"entropy_rate_nats\": 1}",
       "entropy_order1_nats"},
      {"{\"generator\": \"order2_markov\", \"entropy_marginal_nats\": 3, "
       "\"entropy_order1_nats\": 2, \"entropy_rate_nats\": -1}",
       "entropy_rate_nats\" = -1"},
  };
  for (const auto& [text, defect] : cases) {
    write_text(prefix + ".json", text);
    const std::string message = input_error_of([&] { read_synthetic_metadata(prefix, &entropy); });
    EXPECT_NE(message.find(prefix + ".json"), std::string::npos) << message;
    EXPECT_NE(message.find(defect), std::string::npos) << text << " -> " << message;
  }
}

}  // namespace
}  // namespace trainer
