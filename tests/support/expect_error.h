// Expects a call to throw an error of a given type whose message holds given pieces: the check of
// every bad-input test. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace test_support {

// Expects call() to throw an Error whose message contains every piece of `expected`;
// `otherwise` is the failure when it returns.
template <class Error, class Call>
void expect_error(Call&& call, const std::vector<std::string>& expected,
                  const std::string& otherwise) {
  try {
    call();
    ADD_FAILURE() << otherwise;
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const std::string& piece : expected)
      EXPECT_NE(message.find(piece), std::string::npos) << "'" << piece << "' not in: " << message;
  }
}

// Runs `call`, which must throw an Error; returns its message (empty, and a failure, when it
// returns or throws something else).
template <class Error, class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

}  // namespace test_support
