// JSON Lines documents through nlohmann-json (the parser trainer_tokenizer uses for
// tokenizer.json). Rules: the reason names what is wrong, never the whole line (lines are long).
#include "trainer/data/json_lines.h"

#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace trainer {

bool document_of_json_line(std::string_view line, const std::string& key, std::string* text,
                           std::string* reason) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& error) {
    *reason = TRAINER_STR("malformed JSON: " << error.what());
    return false;
  }
  if (!value.is_object()) {
    *reason = TRAINER_STR("expected a JSON object, got " << value.type_name());
    return false;
  }
  const auto member = value.find(key);
  if (member == value.end()) {
    *reason = TRAINER_STR("no member \"" << key << "\" (--json-key)");
    return false;
  }
  if (!member->is_string()) {
    *reason = TRAINER_STR("member \"" << key << "\" is a " << member->type_name()
                                      << ", expected a string");
    return false;
  }
  *text = std::move(member->get_ref<std::string&>());
  return true;
}

bool is_blank_line(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace trainer
