// The flags of `trainer prepare-data`, parsed and cross-checked.
// Rules: every bad flag, value or combination is an InputError naming the flag and the value.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "trainer/data/indexed_dataset.h"
#include "trainer/data/synthetic.h"
#include "trainer/tokenizer/tokenizer.h"

namespace trainer {

struct PrepareDataOptions {
  std::vector<std::string> inputs;  // --input, in order
  std::string output_prefix;
  bool append_eod = false;
  bool split_lines = false;
  std::optional<TokenDType> dtype;  // none: uint16 when the vocabulary fits, else int32
  tokenizer::TokenizerSpec tokenizer;
  std::string json_key = "text";
  bool skip_bad_lines = false;
  int workers = 0;  // 0: every core
  bool synthetic = false;
  SyntheticCorpusSpec spec;
  bool help = false;
};

// The tokenizer flags (--tokenizer, --vocab-file, --merge-file, --tokenizer-file, --split-pattern,
// --eod-id), as prepare-data and generate take them, into spec; false for any other flag.
// `command` names the command in the InputError of a bad value.
bool parse_tokenizer_flag(const std::string& command, const std::string& flag,
                          const std::function<std::string()>& value,
                          tokenizer::TokenizerSpec& spec);

// args: everything after "prepare-data". The usage text is prepare_data_usage() (prepare_data.h).
PrepareDataOptions parse_prepare_data_options(const std::vector<std::string>& args);

}  // namespace trainer
