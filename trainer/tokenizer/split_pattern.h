// Pre-tokenization by regular expression (PCRE2 with JIT, UTF + UCP): the split patterns of
// GPT-2, cl100k, o200k and Llama-3 by name, and any tokenizer.json Split regex. Rules: a
// SplitPattern is compiled once and shared; each thread matches through its own SplitMatcher.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;
struct pcre2_real_match_context_8;
struct pcre2_real_jit_stack_8;

namespace trainer::tokenizer {

// The pattern of a named split ("gpt2", "cl100k", "o200k", "llama3"); InputError naming the
// flag and the names known otherwise.
std::string named_split_pattern(const std::string& name);
inline constexpr const char* kSplitPatternNames = "gpt2, cl100k, o200k, llama3";

// Note [White space as Unicode defines it]: PCRE2's \s also matches U+180E, which Unicode 6.3
// took out of White_Space; the regex engines of tiktoken (Rust) and Hugging Face (Oniguruma)
// follow White_Space. Patterns are compiled with \s and \S replaced by that exact class.
std::string with_unicode_white_space(const std::string& pattern);

class SplitPattern {
 public:
  // origin names the pattern in errors (e.g. `tokenizer.json: pre_tokenizer.pattern.Regex`).
  SplitPattern(const std::string& pattern, const std::string& origin);
  ~SplitPattern();
  SplitPattern(const SplitPattern&) = delete;
  SplitPattern& operator=(const SplitPattern&) = delete;

  const std::string& pattern() const { return pattern_; }  // as given, before the \s rewrite
  const pcre2_real_code_8* code() const { return code_; }

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
};

class SplitMatcher {
 public:
  explicit SplitMatcher(const SplitPattern& pattern);
  ~SplitMatcher();
  SplitMatcher(const SplitMatcher&) = delete;
  SplitMatcher& operator=(const SplitMatcher&) = delete;

  // Calls on_piece(piece) for every non-empty match of text (valid UTF-8) in order and, when
  // keep_gaps, for the text between matches too (Hugging Face's Split, behaviour Isolated);
  // tiktoken drops the gaps.
  template <typename OnPiece>
  void split(std::string_view text, bool keep_gaps, OnPiece&& on_piece) {
    size_t done = 0;  // text before this is handed out
    size_t start = 0, end = 0;
    for (size_t offset = 0; offset <= text.size() && next_match(text, offset, &start, &end);) {
      if (end == start) {  // an empty match: step over one character
        offset = start + 1;
        while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) {
          ++offset;
        }
        continue;
      }
      if (keep_gaps && start > done) on_piece(text.substr(done, start - done));
      on_piece(text.substr(start, end - start));
      done = end;
      offset = end;
    }
    if (keep_gaps && done < text.size()) on_piece(text.substr(done));
  }

 private:
  // The first match at or after offset; false when none.
  bool next_match(std::string_view text, size_t offset, size_t* start, size_t* end);

  const SplitPattern& pattern_;
  pcre2_real_match_data_8* match_data_ = nullptr;
  pcre2_real_match_context_8* match_context_ = nullptr;
  pcre2_real_jit_stack_8* jit_stack_ = nullptr;
};

// The byte offset of the first invalid UTF-8 sequence (overlong forms and surrogates are
// invalid), or npos when text is valid.
size_t find_invalid_utf8(std::string_view text);

}  // namespace trainer::tokenizer
