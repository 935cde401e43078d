// The tokenizer a dataset was made with, read back from its <prefix>.json (the tokenizer's
// kind, files and their sha256, eod id, split pattern), for decoding what a model trained on
// it generates. Rules: a changed or missing tokenizer file is an InputError naming it.
#pragma once

#include <optional>
#include <string>

#include "trainer/tokenizer/tokenizer.h"

namespace trainer {

// The spec that loads the tokenizer of the dataset at `prefix`; nullopt when <prefix>.json names
// no tokenizer (a synthetic corpus). InputError when the file is missing or malformed, or a
// tokenizer file's sha256 differs from the one recorded.
std::optional<tokenizer::TokenizerSpec> dataset_tokenizer_spec(const std::string& prefix);

}  // namespace trainer
