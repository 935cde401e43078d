// <prefix>.json of a tokenized dataset: the tokenizer's identity (kind, sha256 of each file,
// vocabulary size, eod id, split pattern), the token dtype and the counts. Rules: written to a
// temporary first and renamed into place by commit(), after the .bin/.idx are complete.
#pragma once

#include <cstdint>
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
