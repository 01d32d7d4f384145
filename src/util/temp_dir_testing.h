#pragma once
// Temporary folders of tests: one per test (TempDirTest), or one per test program
// (ProcessTempDir).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "util/fs.h"

namespace peak::testing {

class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string prefix) : prefix_(std::move(prefix)) {}
  // A fixture that adds its own set-up calls this first and stops when it failed
  // (ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp())).
  void SetUp() override {
    auto d = make_temp_dir(prefix_);
    ASSERT_TRUE(d.is_ok()) << d.error();
    temp_dir_ = *d;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir_, ec);
  }
  const std::filesystem::path& temp_dir() const { return temp_dir_; }

 private:
  std::string prefix_;
  std::filesystem::path temp_dir_;
};

// A folder that lives as long as the test program (a compile cache that tests building the same
// text share): made at first use, removed after the last test. Register it as a global test
// environment, which gtest owns:
//   auto* const g_cache = testing::ProcessTempDir::add("peak-cuda-test-");
class ProcessTempDir : public ::testing::Environment {
 public:
  explicit ProcessTempDir(std::string prefix) : prefix_(std::move(prefix)) {}
  static ProcessTempDir* add(std::string prefix) {
    auto* dir = new ProcessTempDir(std::move(prefix));
    ::testing::AddGlobalTestEnvironment(dir);
    return dir;
  }
  // Where the folder could not be made, a fixed one below the system's temporary folder.
  const std::filesystem::path& path() {
    if (path_.empty()) {
      auto d = make_temp_dir(prefix_);
      path_ =
          d ? *d : std::filesystem::temp_directory_path() / prefix_.substr(0, prefix_.size() - 1);
    }
    return path_;
  }
  void TearDown() override {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }

 private:
  std::string prefix_;  // ends in '-'
  std::filesystem::path path_;
};

}  // namespace peak::testing
