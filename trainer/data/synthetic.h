// A synthetic corpus whose entropy is known exactly: an order-2 Markov chain over
// a small alphabet of printable bytes. Each context (a, b) has a few likely
// successors, mixed with a uniform floor so the chain is irreducible and
// aperiodic; its stationary law and entropy rate are computed to machine precision.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/tokenizer/tokenizer.h"

namespace trainer {

// The symbols as printable bytes: symbol s is token id kSyntheticAlphabet[s]. The
// first 32 read like text; the rest is the remaining printable ASCII (95 in all).
inline constexpr std::string_view kSyntheticAlphabet =
    "abcdefghijklmnopqrstuvwxyz .,;!?"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    "\"#$%&'()*+-/:<=>@[\\]^_`{|}~";

struct SyntheticCorpusSpec {
  uint64_t seed = 1234;
  int64_t num_tokens = 4'000'000;
  int alphabet = 32;          // symbols; token ids are the bytes of kSyntheticAlphabet
  int branching = 4;          // likely successors per context
  double uniform_mix = 0.02;  // probability mass spread uniformly over all symbols
};

struct SyntheticEntropy {
  double marginal = 0;  // H(X_t) under the stationary law, nats
  double order1 = 0;    // H(X_t | X_{t-1}), nats
  double rate = 0;      // H(X_t | X_{t-1}, X_{t-2}) = entropy rate, nats/token
  // The lowest mean loss a model can reach on samples of seq_length inputs:
  // the first target has one token of context, the others two or more.
  double loss_floor(int64_t seq_length) const {
    return (order1 + static_cast<double>(seq_length - 1) * rate) / static_cast<double>(seq_length);
  }
};

// The chain of a spec, for tests and tools. A = alphabet.
struct SyntheticChain {
  int alphabet = 0;
  std::vector<double> transition;  // (A, A, A): P(c | a, b) at (a * A + b) * A + c
  std::vector<double> stationary;  // (A, A): stationary law pi(a, b) of the pair chain
  SyntheticEntropy entropy;
};

// Validates the spec (InputError naming the field and value) and builds the chain.
SyntheticChain make_synthetic_chain(const SyntheticCorpusSpec& spec);

struct SyntheticCorpus {
  std::vector<int32_t> tokens;
  SyntheticEntropy entropy;
};

// Deterministic in spec (same spec, same tokens, on every machine).
SyntheticCorpus make_synthetic_corpus(const SyntheticCorpusSpec& spec);

// The tokenizer a synthetic corpus names in its <prefix>.json: kind byte (each token a byte of
// kSyntheticAlphabet), vocab_size 256, no end-of-document id.
tokenizer::TokenizerIdentity synthetic_tokenizer();

// <prefix>.json sidecar written by prepare-data --synthetic (its tokenizer, the spec and the
// entropies); read by the trainer to print the floor. read returns false when the file does not
// exist or is the metadata of a tokenized corpus (dataset_metadata.h: "tokenizer" and no
// "generator").
void write_synthetic_metadata(const std::string& prefix, const SyntheticCorpusSpec& spec,
                              const SyntheticEntropy& entropy);
bool read_synthetic_metadata(const std::string& prefix, SyntheticEntropy* entropy);

}  // namespace trainer
