// Split patterns: the named ones, the White_Space rewrite, PCRE2 compilation with JIT and the
// per-thread matcher. Rules: every pattern error is an InputError naming its origin and offset;
// matching never re-checks UTF-8 (callers validate each document once, find_invalid_utf8).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "trainer/tokenizer/split_pattern.h"

#include <pcre2.h>

#include "runtime/error.h"

namespace trainer::tokenizer {
namespace {

// The patterns as tiktoken's encodings and Llama 3's tokenizer define them.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Llama 3 splits as cl100k does.
constexpr const char* kLlama3Pattern = kCl100kPattern;

// Unicode's White_Space property, as class members.
constexpr const char* kWhiteSpaceMembers =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A})"
    R"(\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

constexpr size_t kJitStackMaxBytes = size_t{8} << 20;

}  // namespace

std::string named_split_pattern(const std::string& name) {
  if (name == "gpt2") return kGpt2Pattern;
  if (name == "cl100k") return kCl100kPattern;
  if (name == "o200k") return kO200kPattern;
  if (name == "llama3") return kLlama3Pattern;
  throw runtime::InputError(TRAINER_STR("prepare-data: --split-pattern \""
                                        << name << "\": expected one of " << kSplitPatternNames));
}

std::string with_unicode_white_space(const std::string& pattern) {
  std::string rewritten;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's') {
        rewritten += in_class ? std::string(kWhiteSpaceMembers)
                              : "[" + std::string(kWhiteSpaceMembers) + "]";
      } else if (escaped == 'S' && !in_class) {
        rewritten += "[^" + std::string(kWhiteSpaceMembers) + "]";
      } else if (escaped == 'S') {
        throw runtime::InputError(TRAINER_STR(
            "split pattern \"" << pattern << "\": \\S inside a character class is not supported"));
      } else {
        rewritten += c;
        rewritten += escaped;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      rewritten += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') rewritten += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') rewritten += pattern[++i];  // literal ]
      continue;
    }
    if (in_class && c == ']') in_class = false;
    rewritten += c;
  }
  return rewritten;
}

SplitPattern::SplitPattern(const std::string& pattern, const std::string& origin)
    : pattern_(pattern) {
  const std::string compiled = with_unicode_white_space(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error_code, &error_offset,
                        nullptr);
  if (code_ == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    throw runtime::InputError(
        TRAINER_STR(origin << ": pattern \"" << pattern
                           << "\" does not compile: " << reinterpret_cast<const char*>(message)));
  }
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // without JIT (unsupported CPU) it still matches
}

SplitPattern::~SplitPattern() {
  pcre2_code_free(code_);
}

SplitMatcher::SplitMatcher(const SplitPattern& pattern) : pattern_(pattern) {
  match_data_ = pcre2_match_data_create_from_pattern(pattern.code(), nullptr);
  match_context_ = pcre2_match_context_create(nullptr);
  jit_stack_ = pcre2_jit_stack_create(32 * 1024, kJitStackMaxBytes, nullptr);
  if (match_data_ == nullptr || match_context_ == nullptr || jit_stack_ == nullptr) {
    throw runtime::LibraryError("PCRE2: out of memory creating a matcher");
  }
  pcre2_jit_stack_assign(match_context_, nullptr, jit_stack_);
}

SplitMatcher::~SplitMatcher() {
  pcre2_jit_stack_free(jit_stack_);
  pcre2_match_context_free(match_context_);
  pcre2_match_data_free(match_data_);
}

bool SplitMatcher::next_match(std::string_view text, size_t offset, size_t* start, size_t* end) {
  const int result =
      pcre2_match(pattern_.code(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset,
                  PCRE2_NO_UTF_CHECK, match_data_, match_context_);
  if (result == PCRE2_ERROR_NOMATCH) return false;
  if (result < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(result, message, sizeof message);
    throw runtime::InputError(TRAINER_STR(
        "split pattern \"" << pattern_.pattern() << "\": matching failed at byte " << offset << ": "
                           << reinterpret_cast<const char*>(message)));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data_);
  *start = ovector[0];
  *end = ovector[1];
  return true;
}

size_t find_invalid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    // Eight ASCII bytes at a time: the common case.
    while (i + 8 <= size) {
      uint64_t word = 0;
      for (int k = 0; k < 8; ++k) word |= uint64_t{bytes[i + k]} << (8 * k);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= size) break;
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    uint32_t minimum = 0, code_point = 0;
    if ((lead & 0xE0) == 0xC0) {
      length = 2, minimum = 0x80, code_point = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, minimum = 0x800, code_point = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, minimum = 0x10000, code_point = lead & 0x07;
    } else {
      return i;
    }
    if (i + length > size) return i;
    for (size_t k = 1; k < length; ++k) {
      if ((bytes[i + k] & 0xC0) != 0x80) return i;
      code_point = (code_point << 6) | (bytes[i + k] & 0x3F);
    }
    if (code_point < minimum || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace trainer::tokenizer
