// One line of a JSON Lines input: a JSON object whose member --json-key (default "text") is the
// document. Rules: strict JSON (escapes and surrogate pairs decoded exactly, invalid UTF-8 and
// lone surrogates rejected); the reason a line is bad is returned, the caller names file and line.
#pragma once

#include <string>
#include <string_view>

namespace trainer {

// True and *text set when the line is an object with a string member key; false and *reason set
// otherwise.
bool document_of_json_line(std::string_view line, const std::string& key, std::string* text,
                           std::string* reason);

// Blank lines (only spaces, tabs, '\r') hold no document and are skipped, not bad.
bool is_blank_line(std::string_view line);

}  // namespace trainer
