// The tokenizer a run's data was made with, read back from the datasets' <prefix>.json (the
// tokenizer's kind, files and their sha256, eod id, split pattern), for decoding what a model
// trained on it generates. Rules: a changed or missing tokenizer file is an InputError naming it.
#pragma once

#include <optional>
#include <string>

#include "trainer/config/config.h"
#include "trainer/tokenizer/tokenizer.h"

namespace trainer {

// The spec that loads the tokenizer of the dataset at `prefix`; nullopt when there is no
// <prefix>.json or it names no tokenizer. InputError when the file is malformed, or a tokenizer
// file's sha256 differs from the one recorded.
std::optional<tokenizer::TokenizerSpec> dataset_tokenizer_spec(const std::string& prefix);

// The tokenizer of a run's data (data.path, or the first dataset of data.blend whose <prefix>.json
// names one: a blend's tokenizers are checked to be the same when the run starts); nullopt when
// no dataset names one.
std::optional<tokenizer::TokenizerSpec> data_tokenizer_spec(const DataConfig& data);

}  // namespace trainer
