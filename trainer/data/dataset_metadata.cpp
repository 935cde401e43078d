// The <prefix>.json writer (nlohmann-json, keys in a fixed order so equal datasets give equal
// files) and the reader of its tokenizer. Rules: read_synthetic_metadata treats a file with
// "tokenizer" and no "generator" as a tokenized corpus with no known loss floor.
#include "trainer/data/dataset_metadata.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace trainer {

namespace {

nlohmann::ordered_json identity_json(const tokenizer::TokenizerIdentity& identity) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const tokenizer::TokenizerFileDigest& file : identity.files) {
    files.push_back({{"path", file.path}, {"sha256", file.sha256}});
  }
  return {{"kind", identity.kind},
          {"files", files},
          {"vocab_size", identity.vocab_size},
          {"eod_id", identity.eod_id ? nlohmann::ordered_json(*identity.eod_id) : nullptr},
          {"split_pattern", identity.split_pattern}};
}

}  // namespace

std::string tokenizer_identity_json(const tokenizer::TokenizerIdentity& identity) {
  return identity_json(identity).dump();
}

std::string dataset_metadata_json(const DatasetMetadata& metadata) {
  nlohmann::ordered_json root = {
      {"tokenizer", identity_json(metadata.tokenizer)},
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

namespace {

// The member `name` of the tokenizer object, which must exist and satisfy `valid`.
const nlohmann::json& member(const nlohmann::json& object, const std::string& path,
                             const char* name, bool (nlohmann::json::*valid)() const noexcept,
                             const char* expected) {
  const auto found = object.find(name);
  if (found == object.end()) {
    throw runtime::InputError(TRAINER_STR(path << ": \"tokenizer." << name << "\" is missing"));
  }
  if (!((*found).*valid)()) {
    throw runtime::InputError(TRAINER_STR(path << ": \"tokenizer." << name << "\" is "
                                               << found->dump() << ", expected " << expected));
  }
  return *found;
}

tokenizer::TokenizerIdentity parse_identity(const nlohmann::json& object, const std::string& path) {
  using json = nlohmann::json;
  if (!object.is_object()) {
    throw runtime::InputError(TRAINER_STR(path << ": \"tokenizer\" is not a JSON object"));
  }
  tokenizer::TokenizerIdentity identity;
  identity.kind = member(object, path, "kind", &json::is_string, "a string").get<std::string>();
  for (const json& file : member(object, path, "files", &json::is_array, "a list")) {
    if (!file.is_object() || !file.contains("path") || !file["path"].is_string() ||
        !file.contains("sha256") || !file["sha256"].is_string()) {
      throw runtime::InputError(TRAINER_STR(path << ": \"tokenizer.files\" holds " << file.dump()
                                                 << ", expected {\"path\": ..., \"sha256\": ...}"));
    }
    identity.files.push_back({file["path"].get<std::string>(), file["sha256"].get<std::string>()});
  }
  const json& vocab = member(object, path, "vocab_size", &json::is_number_integer, "an integer");
  identity.vocab_size = vocab.get<int64_t>();
  if (identity.vocab_size < 1) {
    throw runtime::InputError(TRAINER_STR(path << ": \"tokenizer.vocab_size\" is "
                                               << identity.vocab_size << ", expected >= 1"));
  }
  const auto eod = object.find("eod_id");
  if (eod != object.end() && !eod->is_null()) {
    if (!eod->is_number_integer() || eod->get<int64_t>() < 0 ||
        eod->get<int64_t>() >= identity.vocab_size) {
      throw runtime::InputError(TRAINER_STR(path << ": \"tokenizer.eod_id\" is " << eod->dump()
                                                 << ", expected null or an id below vocab_size "
                                                 << identity.vocab_size));
    }
    identity.eod_id = eod->get<int32_t>();
  }
  const auto split = object.find("split_pattern");
  if (split != object.end()) {
    if (!split->is_string()) {
      throw runtime::InputError(TRAINER_STR(path << ": \"tokenizer.split_pattern\" is "
                                                 << split->dump() << ", expected a string"));
    }
    identity.split_pattern = split->get<std::string>();
  }
  return identity;
}

}  // namespace

std::optional<tokenizer::TokenizerIdentity> read_dataset_tokenizer(const std::string& prefix) {
  const std::string path = prefix + ".json";
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored)) return std::nullopt;
  std::ifstream in(path);
  if (!in) throw runtime::InputError(TRAINER_STR(path << ": cannot be read"));
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& error) {
    throw runtime::InputError(TRAINER_STR(path << ": malformed JSON: " << error.what()));
  }
  if (!root.is_object()) {
    throw runtime::InputError(TRAINER_STR(path << ": dataset metadata is not a JSON object"));
  }
  const auto found = root.find("tokenizer");
  if (found == root.end()) return std::nullopt;
  return parse_identity(*found, path);
}

bool same_tokenizer(const tokenizer::TokenizerIdentity& a, const tokenizer::TokenizerIdentity& b) {
  if (a.kind != b.kind || a.split_pattern != b.split_pattern || a.files.size() != b.files.size())
    return false;
  for (size_t i = 0; i < a.files.size(); ++i) {
    if (a.files[i].sha256 != b.files[i].sha256) return false;
  }
  return true;
}

std::string describe_tokenizer(const tokenizer::TokenizerIdentity& identity) {
  std::string text = identity.kind + " (vocab_size " + std::to_string(identity.vocab_size) +
                     ", eod_id " + (identity.eod_id ? std::to_string(*identity.eod_id) : "none");
  for (size_t i = 0; i < identity.files.size(); ++i) {
    const tokenizer::TokenizerFileDigest& file = identity.files[i];
    text += (i == 0 ? "; " : ", ") + std::filesystem::path(file.path).filename().string() +
            " sha256 " + file.sha256.substr(0, 12);
  }
  return text + ")";
}

}  // namespace trainer
