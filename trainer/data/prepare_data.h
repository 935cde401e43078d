// `trainer prepare-data`: documents (raw text, JSON Lines, .gz / .zst) -> Megatron indexed
// dataset through a byte, gpt2, hf, tiktoken or sentencepiece tokenizer, plus <prefix>.json; or a
// synthetic corpus of known entropy (--synthetic).
#pragma once

#include <string>
#include <vector>

namespace trainer {

inline constexpr int kByteVocabSize = 256;
inline constexpr int kEndOfDocumentToken = 256;

// args: everything after "prepare-data". Prints what it wrote; returns the exit code; throws
// runtime::InputError on bad arguments or unreadable input, leaving no partial output.
int run_prepare_data(const std::vector<std::string>& args);
std::string prepare_data_usage();

}  // namespace trainer
