// One JSON object written key by key (metrics.jsonl and events.jsonl lines): each key at most
// once (a second use of a key is a bug and asserts), strings escaped, and non-finite doubles
// written as the strings "nan", "inf", "-inf", since JSON has no such numbers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainer {

// `text` as a JSON string: "..." with \" \\ \n \t \uXXXX escapes; UTF-8 passes through.
std::string json_quote(std::string_view text);

class JsonObjectWriter {
 public:
  // `format`: the printf conversion of a finite double ("%.9g" keeps every bit of a float).
  JsonObjectWriter& number(std::string_view key, double value, const char* format = "%.9g");
  JsonObjectWriter& integer(std::string_view key, int64_t value);
  JsonObjectWriter& string(std::string_view key, std::string_view value);
  JsonObjectWriter& boolean(std::string_view key, bool value);
  JsonObjectWriter& integers(std::string_view key, const std::vector<int64_t>& values);
  // `json`: a value already written as JSON text.
  JsonObjectWriter& raw(std::string_view key, std::string json);

  bool has(std::string_view key) const;
  // "{...}" without a newline.
  std::string text() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // key, JSON text
};

// A double as JSON text: "%.9g"-style for finite values, a quoted "nan"/"inf"/"-inf" otherwise.
std::string json_number(double value, const char* format = "%.9g");

}  // namespace trainer
