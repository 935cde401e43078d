// Helpers of the tokenizer tests: the fixture corpus's documents, the committed reference ids,
// a scratch file and the message of an InputError.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "tests/support/expect_error.h"

namespace trainer::tokenizer::testing {

inline std::string fixture(const std::string& name) {
  return std::string(TRAINER_SOURCE_DIR) + "/tests/unit/tokenizer/data/" + name;
}

inline std::string read_text(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
}

// The "text" of every line of data/corpus.jsonl.
inline std::vector<std::string> corpus_documents() {
  std::vector<std::string> documents;
  std::ifstream stream(fixture("corpus.jsonl"));
  for (std::string line; std::getline(stream, line);) {
    if (!line.empty()) documents.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
  }
  return documents;
}

// Member `name` of a reference file: one id list per document.
inline std::vector<std::vector<int32_t>> reference_ids(const std::string& file,
                                                       const std::string& name) {
  return nlohmann::json::parse(read_text(fixture(file)))[name]
      .get<std::vector<std::vector<int32_t>>>();
}

// A file in the system temp directory, removed at scope exit.
class ScratchFile {
 public:
  ScratchFile(const std::string& name, const std::string& text)
      : path_((std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name))
                  .string()) {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~ScratchFile() { std::filesystem::remove(path_); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

template <typename Action>
std::string input_error_of(Action&& action) {
  return test_support::error_of<runtime::InputError>(action);
}

}  // namespace trainer::tokenizer::testing
