// The <prefix>.json writer (nlohmann-json, keys in a fixed order so equal datasets give equal
// files). Rules: the trainer's reader (read_synthetic_metadata) treats a file with "tokenizer"
// and no "generator" as a tokenized corpus with no known loss floor.
#include "trainer/data/dataset_metadata.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace trainer {

std::string dataset_metadata_json(const DatasetMetadata& metadata) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const tokenizer::TokenizerFileDigest& file : metadata.tokenizer.files) {
    files.push_back({{"path", file.path}, {"sha256", file.sha256}});
  }
  const tokenizer::TokenizerIdentity& identity = metadata.tokenizer;
  nlohmann::ordered_json root = {
      {"tokenizer",
       {{"kind", identity.kind},
        {"files", files},
        {"vocab_size", identity.vocab_size},
        {"eod_id", identity.eod_id ? nlohmann::ordered_json(*identity.eod_id) : nullptr},
        {"split_pattern", identity.split_pattern}}},
      {"dtype", metadata.dtype},
      {"append_eod", metadata.append_eod},
      {"inputs", metadata.inputs},
      {"documents", metadata.documents},
      {"tokens", metadata.tokens},
      {"bytes", metadata.text_bytes},
      {"bad_lines", metadata.bad_lines},
  };
  return root.dump(2) + "\n";
}

DatasetMetadataFile::DatasetMetadataFile(const std::string& prefix, const DatasetMetadata& metadata)
    : path_(prefix + ".json"), temporary_(prefix + ".json.tmp") {
  const std::string text = dataset_metadata_json(metadata);
  std::FILE* file = std::fopen(temporary_.c_str(), "w");
  if (file == nullptr) {
    throw runtime::LibraryError(
        TRAINER_STR("cannot create " << temporary_ << ": " << std::strerror(errno)));
  }
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  if (std::fclose(file) != 0 || !written) {
    std::remove(temporary_.c_str());
    throw runtime::LibraryError(TRAINER_STR("writing " << temporary_ << " failed"));
  }
}

DatasetMetadataFile::~DatasetMetadataFile() {
  if (!committed_) std::remove(temporary_.c_str());
}

void DatasetMetadataFile::commit() {
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0) {
    throw runtime::LibraryError(
        TRAINER_STR("renaming " << temporary_ << " to " << path_ << ": " << std::strerror(errno)));
  }
  committed_ = true;
}

}  // namespace trainer
