// JsonObjectWriter: fields in the order given, unique keys asserted.
#include "trainer/util/json_object_writer.h"

#include <cmath>
#include <cstdio>

#include "runtime/error.h"

namespace trainer {

std::string json_number(double value, const char* format) {
  char text[64];
  std::snprintf(text, sizeof text, std::isfinite(value) ? format : "%g", value);
  return std::isfinite(value) ? std::string(text) : json_quote(text);
}

JsonObjectWriter& JsonObjectWriter::number(std::string_view key, double value, const char* format) {
  return raw(key, json_number(value, format));
}

JsonObjectWriter& JsonObjectWriter::integer(std::string_view key, int64_t value) {
  return raw(key, std::to_string(value));
}

JsonObjectWriter& JsonObjectWriter::string(std::string_view key, std::string_view value) {
  return raw(key, json_quote(value));
}

JsonObjectWriter& JsonObjectWriter::boolean(std::string_view key, bool value) {
  return raw(key, value ? "true" : "false");
}

JsonObjectWriter& JsonObjectWriter::integers(std::string_view key,
                                             const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return raw(key, text + "]");
}

JsonObjectWriter& JsonObjectWriter::raw(std::string_view key, std::string json) {
  TRAINER_ASSERT(!has(key), "JSON key \"" << key << "\" written twice");
  fields_.emplace_back(std::string(key), std::move(json));
  return *this;
}

bool JsonObjectWriter::has(std::string_view key) const {
  for (const auto& field : fields_)
    if (field.first == key) return true;
  return false;
}

std::string JsonObjectWriter::text() const {
  std::string line = "{";
  for (size_t i = 0; i < fields_.size(); ++i)
    line += (i ? ", " : "") + json_quote(fields_[i].first) + ": " + fields_[i].second;
  return line + "}";
}

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
          out += escape;
        } else {
          out += c;  // UTF-8 passes through unchanged
        }
    }
  }
  return out + "\"";
}

}  // namespace trainer
