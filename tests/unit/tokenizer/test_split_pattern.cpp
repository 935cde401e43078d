// Split patterns: \s means Unicode White_Space (Note [White space as Unicode defines it]),
// matches and gaps come out in order, named patterns compile, UTF-8 validation finds the byte.
#include <gtest/gtest.h>

#include <algorithm>

#include "tokenizer_test_util.h"
#include "trainer/tokenizer/split_pattern.h"

namespace trainer::tokenizer {
namespace {

std::vector<std::string> split(const std::string& pattern, std::string_view text, bool keep_gaps) {
  const SplitPattern compiled(pattern, "test");
  SplitMatcher matcher(compiled);
  std::vector<std::string> pieces;
  matcher.split(text, keep_gaps, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

TEST(SplitPattern, WhiteSpaceIsUnicodeWhiteSpace) {
  // U+0085 (NEL) is White_Space; U+180E (Mongolian vowel separator) and U+FEFF are not.
  EXPECT_EQ(split(R"(\s+)",
                  "a\xc2\x85"
                  "b",
                  false),
            (std::vector<std::string>{"\xc2\x85"}));
  EXPECT_TRUE(split(R"(\s+)", "\xe1\xa0\x8e", false).empty());
  EXPECT_TRUE(split(R"(\s+)", "\xef\xbb\xbf", false).empty());
  EXPECT_EQ(split(R"([^\s]+)", "x\xe1\xa0\x8ey z", false),
            (std::vector<std::string>{"x\xe1\xa0\x8ey", "z"}));
  EXPECT_EQ(split(R"(\S+)", "\xe3\x80\x80q\xe3\x80\x80", false), (std::vector<std::string>{"q"}));
  const std::string in_class = with_unicode_white_space(R"([\]\s])");  // members, no nested class
  EXPECT_EQ(std::count(in_class.begin(), in_class.end(), '['), 1) << in_class;
  EXPECT_TRUE(in_class.starts_with("[\\]\\t") && in_class.ends_with("\\x{3000}]")) << in_class;
}

TEST(SplitPattern, GapsAreKeptOrDropped) {
  EXPECT_EQ(split("[0-9]+", "ab12cd3", true), (std::vector<std::string>{"ab", "12", "cd", "3"}));
  EXPECT_EQ(split("[0-9]+", "ab12cd3", false), (std::vector<std::string>{"12", "3"}));
  EXPECT_EQ(split("x*", "abxxc", true),
            (std::vector<std::string>{"ab", "xx", "c"}));  // empty matches
}

TEST(SplitPattern, Gpt2PatternSplitsAsGpt2) {
  EXPECT_EQ(
      split(named_split_pattern("gpt2"), "He's  here'S 42!\n\n x", false),
      (std::vector<std::string>{"He", "'s", " ", " here", "'", "S", " 42", "!", "\n\n", " x"}));
  EXPECT_EQ(split(named_split_pattern("cl100k"), "HE'S 12345", false),
            (std::vector<std::string>{"HE", "'S", " ", "123", "45"}));
  for (const char* name : {"gpt2", "cl100k", "o200k", "llama3"}) {
    EXPECT_NO_THROW(SplitPattern(named_split_pattern(name), name));
  }
  const std::string message = testing::input_error_of([] { named_split_pattern("p50k"); });
  EXPECT_NE(message.find("\"p50k\""), std::string::npos) << message;
}

TEST(SplitPattern, BadPatternNamesItsOrigin) {
  const std::string message = testing::input_error_of(
      [] { SplitPattern("(unclosed", "file.json: pre_tokenizer.pattern"); });
  EXPECT_NE(message.find("file.json: pre_tokenizer.pattern"), std::string::npos) << message;
}

TEST(SplitPattern, FindsTheFirstInvalidUtf8Byte) {
  EXPECT_EQ(find_invalid_utf8("plain ascii text, long enough for the fast path"),
            std::string::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xc3\xa9 \xf0\x9f\x98\x80"), std::string::npos);
  EXPECT_EQ(find_invalid_utf8("abcdefghij\xff"), 10u);
  EXPECT_EQ(find_invalid_utf8("ab\xc0\xaf"), 2u);        // overlong '/'
  EXPECT_EQ(find_invalid_utf8("ab\xed\xa0\x80"), 2u);    // a surrogate
  EXPECT_EQ(find_invalid_utf8("ab\xe2\x82"), 2u);        // truncated
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
}

}  // namespace
}  // namespace trainer::tokenizer
