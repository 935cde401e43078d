// Scalar values of the config: strict YAML text -> number/bool/string readers
// (integers reject fractions and overflow, booleans only true/false) and
// writers whose text reads back to exactly the same value.
#include "trainer/config/fields.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

namespace trainer::config_detail {
namespace {

// The scalar text of `node`; throws "expected <what>, got ..." for maps, lists and null.
const std::string& scalar_text(const YAML::Node& node, const std::string& path, const char* what) {
  if (!node.IsScalar()) {
    throw runtime::ConfigError(path, std::string("expected ") + what + ", got " + describe(node));
  }
  return node.Scalar();
}

// from_chars over the whole text; a leading '+' is allowed as in YAML.
template <class Number, class... Format>
std::errc parse_whole(std::string_view text, Number& value, Format... format) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-') text.remove_prefix(1);
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value, format...);
  if (error != std::errc()) return error;
  return stop == end ? std::errc() : std::errc::invalid_argument;
}

// YAML 1.2's .inf / -.inf / .nan spellings (any case, optional '+').
bool parse_yaml_special(std::string_view text, double& value) {
  std::string lower;
  for (const char c : text) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == ".inf" || lower == "+.inf") {
    value = std::numeric_limits<double>::infinity();
  } else if (lower == "-.inf") {
    value = -std::numeric_limits<double>::infinity();
  } else if (lower == ".nan") {
    value = std::numeric_limits<double>::quiet_NaN();
  } else {
    return false;
  }
  return true;
}

template <class Float>
void read_float(const YAML::Node& node, const std::string& path, Float& value) {
  const std::string& text = scalar_text(node, path, "a number");
  double special = 0;
  if (parse_yaml_special(text, special)) {
    value = static_cast<Float>(special);
    return;
  }
  Float parsed = 0;
  const std::errc error = parse_whole(text, parsed, std::chars_format::general);
  if (error == std::errc::result_out_of_range) {
    throw runtime::ConfigError(path, "number '" + text + "' is out of range for a " +
                                         (sizeof(Float) == 4 ? "32" : "64") + "-bit float");
  }
  if (error != std::errc())
    throw runtime::ConfigError(path, "expected a number, got '" + text + "'");
  value = parsed;
}

template <class Float>
std::string format_float(Float value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  TRAINER_ASSERT(error == std::errc(), "to_chars failed");
  return std::string(buffer, end);
}

}  // namespace

std::string describe(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  return "null";
}

std::string format_number(double value) {
  return format_float(value);
}
std::string format_number(float value) {
  return format_float(value);
}

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

void read_scalar(const YAML::Node& node, const std::string& path, int64_t& value) {
  const std::string& text = scalar_text(node, path, "an integer");
  int64_t parsed = 0;
  const std::errc error = parse_whole(text, parsed);
  if (error == std::errc::result_out_of_range) {
    throw runtime::ConfigError(path, "integer '" + text + "' is out of the 64-bit range");
  }
  if (error != std::errc())
    throw runtime::ConfigError(path, "expected an integer, got '" + text + "'");
  value = parsed;
}

void read_scalar(const YAML::Node& node, const std::string& path, uint64_t& value) {
  const std::string& text = scalar_text(node, path, "a non-negative integer");
  uint64_t parsed = 0;
  const std::errc error =
      text.starts_with('-') ? std::errc::invalid_argument : parse_whole(text, parsed);
  if (error == std::errc::result_out_of_range) {
    throw runtime::ConfigError(path, "integer '" + text + "' is out of the unsigned 64-bit range");
  }
  if (error != std::errc()) {
    throw runtime::ConfigError(path, "expected a non-negative integer, got '" + text + "'");
  }
  value = parsed;
}

void read_scalar(const YAML::Node& node, const std::string& path, float& value) {
  read_float(node, path, value);
}

void read_scalar(const YAML::Node& node, const std::string& path, double& value) {
  read_float(node, path, value);
}

void read_scalar(const YAML::Node& node, const std::string& path, bool& value) {
  const std::string& text = scalar_text(node, path, "true or false");
  if (text != "true" && text != "false") {
    throw runtime::ConfigError(path, "expected true or false, got '" + text + "'");
  }
  value = text == "true";
}

void read_scalar(const YAML::Node& node, const std::string& path, std::string& value) {
  value = scalar_text(node, path, "a string");
}

void write_scalar(YAML::Emitter& out, int64_t value) {
  out << std::to_string(value);
}
void write_scalar(YAML::Emitter& out, uint64_t value) {
  out << std::to_string(value);
}
void write_scalar(YAML::Emitter& out, float value) {
  out << format_number(value);
}
void write_scalar(YAML::Emitter& out, double value) {
  out << format_number(value);
}
void write_scalar(YAML::Emitter& out, bool value) {
  out << (value ? "true" : "false");
}
// Always quoted, so that "", "true" or "~" read back as the same string.
void write_scalar(YAML::Emitter& out, const std::string& value) {
  out << YAML::DoubleQuoted << value;
}

}  // namespace trainer::config_detail
