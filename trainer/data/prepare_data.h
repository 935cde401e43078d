// `trainer prepare-data`: text files -> Megatron indexed dataset through the
// byte tokenizer (ids 0..255, end-of-document id 256 when --append-eod), or a
// synthetic corpus of known entropy (--synthetic).
#pragma once

#include <string>
#include <vector>

namespace trainer {

inline constexpr int kByteVocabSize = 256;
inline constexpr int kEndOfDocumentToken = 256;

// args: everything after "prepare-data". Prints what it wrote; returns the exit
// code; throws runtime::InputError on bad arguments or unreadable input.
int run_prepare_data(const std::vector<std::string>& args);
std::string prepare_data_usage();

}  // namespace trainer
