// JSON objects read with yaml-cpp (JSON is YAML's flow syntax): the one reader behind the
// safetensors header and the checkpoint manifest, and the typed field reader of Hugging Face
// config.json files.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <utility>

namespace trainer {

// `text` as a YAML map, when it holds one JSON object. Otherwise throws InputError
// "<path>: <not_json>: <why>", `why` being yaml-cpp's message or `not_object`.
YAML::Node load_json_object(const std::string& text, const std::string& path,
                            const std::string& not_json, const std::string& not_object);

// The fields of a config.json object, typed: a field that is missing (where required), of
// another type or out of range throws InputError `<source>: "<field>" <why>`; an absent or null
// optional field gives the fallback. object() reads a nested object, its fields named
// "<parent>.<field>".
class JsonConfigReader {
 public:
  JsonConfigReader(const std::string& json_text, const std::string& source);

  [[noreturn]] void fail(const std::string& field, const std::string& message) const;
  bool has(const std::string& field) const;  // present and not null
  int64_t positive_integer(const std::string& field) const;
  int64_t optional_positive_integer(const std::string& field, int64_t fallback) const;
  float number(const std::string& field, float fallback) const;
  std::string string(const std::string& field, const std::string& fallback) const;
  bool boolean(const std::string& field, bool fallback) const;
  JsonConfigReader object(const std::string& field) const;  // has(field) and an object
  const YAML::Node& node() const { return root_; }           // the object, for other readers

 private:
  JsonConfigReader(YAML::Node root, std::string source, std::string prefix)
      : source_(std::move(source)), prefix_(std::move(prefix)), root_(std::move(root)) {}
  static std::string describe(const YAML::Node& node);

  std::string source_;
  std::string prefix_;  // "" at the top, "parent." inside object(parent)
  YAML::Node root_;
};

}  // namespace trainer
