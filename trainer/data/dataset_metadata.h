// <prefix>.json of a tokenized dataset: the tokenizer's identity (kind, sha256 of each file,
// vocabulary size, eod id, split pattern), the token dtype and the counts; and the trainer's
// reader of its tokenizer. Rules: written to a temporary first and renamed into place by
// commit(), after the .bin/.idx are complete.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainer/tokenizer/tokenizer.h"

namespace trainer {

struct DatasetMetadata {
  tokenizer::TokenizerIdentity tokenizer;
  std::string dtype;  // "uint16" or "int32"
  bool append_eod = false;
  std::vector<std::string> inputs;
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t text_bytes = 0;  // decompressed text tokenized
  int64_t bad_lines = 0;   // skipped with --skip-bad-lines
};

// The JSON text of the metadata.
std::string dataset_metadata_json(const DatasetMetadata& metadata);
// The "tokenizer" member of <prefix>.json alone, as one line of JSON.
std::string tokenizer_identity_json(const tokenizer::TokenizerIdentity& identity);

// The tokenizer <prefix>.json names; nullopt when the file does not exist or names no tokenizer
// (a synthetic corpus written before the file named one). A malformed file or tokenizer member
// is an InputError naming the file and the field.
std::optional<tokenizer::TokenizerIdentity> read_dataset_tokenizer(const std::string& prefix);

// Whether two datasets' ids mean the same tokens: the same kind, files (by sha256, in order) and
// split pattern. The vocabulary size and eod id may differ (--eod-id adds an id).
bool same_tokenizer(const tokenizer::TokenizerIdentity& a, const tokenizer::TokenizerIdentity& b);
// "gpt2 (vocab 50257, eod 50256, files vocab.json 3a4b5c6d7e8f, merges.txt ...)": for logs.
std::string describe_tokenizer(const tokenizer::TokenizerIdentity& identity);

class DatasetMetadataFile {
 public:
  // Writes <prefix>.json.tmp now; LibraryError when it cannot.
  DatasetMetadataFile(const std::string& prefix, const DatasetMetadata& metadata);
  ~DatasetMetadataFile();  // removes the temporary unless committed
  DatasetMetadataFile(const DatasetMetadataFile&) = delete;
  DatasetMetadataFile& operator=(const DatasetMetadataFile&) = delete;
  void commit();  // renames it to <prefix>.json

 private:
  std::string path_;
  std::string temporary_;
  bool committed_ = false;
};

}  // namespace trainer
