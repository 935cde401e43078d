// load_json_object: a JSON object must start with '{' (YAML would read a bare scalar or list),
// parse, and be a map. JsonConfigReader: typed fields (a number is an untagged scalar, a string a
// quoted one).
#include "trainer/export/json_object.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "runtime/error.h"
#include "trainer/export/safetensors.h"
#include "trainer/util/json_object_writer.h"

namespace trainer {

YAML::Node load_json_object(const std::string& text, const std::string& path,
                            const std::string& not_json, const std::string& not_object) {
  auto fail = [&](const std::string& why) {
    throw runtime::InputError(path + ": " + not_json + ": " + why);
  };
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') fail(not_object);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    fail(error.what());
  }
  if (!root.IsMap()) fail(not_object);
  return root;
}

JsonConfigReader::JsonConfigReader(const std::string& json_text, const std::string& source)
    : source_(source) {
  try {
    root_ = YAML::Load(json_text);
  } catch (const YAML::Exception& error) {
    throw runtime::InputError(source_ + ": not valid JSON: " + error.what());
  }
  if (!root_.IsMap()) throw runtime::InputError(source_ + ": not a JSON object");
}

void JsonConfigReader::fail(const std::string& field, const std::string& message) const {
  throw runtime::InputError(source_ + ": \"" + prefix_ + field + "\" " + message);
}

bool JsonConfigReader::has(const std::string& field) const {
  const YAML::Node node = root_[field];
  return node && !node.IsNull();
}

int64_t JsonConfigReader::positive_integer(const std::string& field) const {
  const YAML::Node node = root_[field];
  if (!node) fail(field, "is missing");
  const std::string text = node.IsScalar() && node.Tag() == "?" ? node.Scalar() : "";
  if (text.empty() || text.size() > 18 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoll(text) <= 0)
    fail(field, "must be a positive integer, got " + describe(node));
  return std::stoll(text);
}

int64_t JsonConfigReader::optional_positive_integer(const std::string& field,
                                                    int64_t fallback) const {
  return has(field) ? positive_integer(field) : fallback;
}

float JsonConfigReader::number(const std::string& field, float fallback) const {
  if (!has(field)) return fallback;
  const YAML::Node node = root_[field];
  const std::string text = node.IsScalar() && node.Tag() == "?" ? node.Scalar() : "";
  char* end = nullptr;
  const float value = text.empty() ? 0.f : std::strtof(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value))
    fail(field, "must be a finite number, got " + describe(node));
  return value;
}

std::string JsonConfigReader::string(const std::string& field, const std::string& fallback) const {
  if (!has(field)) return fallback;
  const YAML::Node node = root_[field];
  if (!node.IsScalar() || node.Tag() != "!") fail(field, "must be a string, got " + describe(node));
  return node.Scalar();
}

bool JsonConfigReader::boolean(const std::string& field, bool fallback) const {
  if (!has(field)) return fallback;
  const YAML::Node node = root_[field];
  const std::string text = node.IsScalar() && node.Tag() == "?" ? node.Scalar() : "";
  if (text != "true" && text != "false")
    fail(field, "must be true or false, got " + describe(node));
  return text == "true";
}

JsonConfigReader JsonConfigReader::object(const std::string& field) const {
  const YAML::Node node = root_[field];
  if (!node || !node.IsMap()) fail(field, "must be an object, got " + describe(node));
  return JsonConfigReader(node, source_, prefix_ + field + ".");
}

std::string JsonConfigReader::describe(const YAML::Node& node) {
  if (!node) return "nothing";
  if (node.IsScalar()) return node.Tag() == "!" ? json_quote(node.Scalar()) : node.Scalar();
  return node.IsSequence() ? "a list" : node.IsMap() ? "an object" : "null";
}

}  // namespace trainer
