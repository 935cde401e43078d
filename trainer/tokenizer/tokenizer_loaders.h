// The loader of each tokenizer kind, called by load_tokenizer (tokenizer.cpp).
// Rules: each validates its files completely before returning; errors name file and field/line.
#pragma once

#include <memory>

#include "trainer/tokenizer/tokenizer.h"

namespace trainer::tokenizer {

std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const TokenizerSpec& spec);
std::unique_ptr<Tokenizer> load_hf_tokenizer(const TokenizerSpec& spec);
std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const TokenizerSpec& spec);
std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const TokenizerSpec& spec);

}  // namespace trainer::tokenizer
