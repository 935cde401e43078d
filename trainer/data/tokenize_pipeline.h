// The tokenization half of `trainer prepare-data`: reads documents (whole files, lines, or JSON
// Lines), tokenizes them on N worker threads and writes them in input order, so the output bytes
// are the same for every N. Rules: a bad line stops the run (InputError naming file and line)
// unless skip_bad_lines; nothing is written by the caller's writer until its finish().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/indexed_dataset.h"
#include "trainer/tokenizer/tokenizer.h"

namespace trainer {

struct TokenizeOptions {
  std::vector<std::string> inputs;  // in order; JSON Lines by extension (is_json_lines_path)
  bool split_lines = false;         // raw text: each non-empty line is a document
  std::string json_key = "text";
  bool skip_bad_lines = false;
  bool append_eod = false;  // needs the tokenizer's eod id
  int workers = 1;          // tokenizing threads, >= 1
  bool show_progress = true;
};

struct TokenizeCounts {
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t text_bytes = 0;  // decompressed bytes of the documents' text
  int64_t bad_lines = 0;   // skipped (skip_bad_lines)
};

TokenizeCounts tokenize_inputs(const tokenizer::Tokenizer& tokenizer,
                               const TokenizeOptions& options, IndexedDatasetWriter& writer);

}  // namespace trainer
