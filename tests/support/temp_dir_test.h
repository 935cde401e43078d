// A GoogleTest fixture with a fresh directory per test, <tmp>/<prefix><test name>_<pid>, removed
// after the test. Header-only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>

namespace test_support {

class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::temp_directory_path() /
            (prefix_ + std::string(info->name()) + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // `name` inside the test's directory.
  std::string path(const std::string& name) const { return (root_ / name).string(); }

  std::filesystem::path root_;

 private:
  std::string prefix_;
};

}  // namespace test_support
