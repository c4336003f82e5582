#pragma once
// A fresh directory under the system's temporary folder for one test case, removed at the end.
#include <unistd.h>

#include <filesystem>
#include <string>

namespace saccade::testing {

/// temp_directory_path()/<prefix>_<pid>_<n>, created empty; removed with its contents by the destructor.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "saccade_test") {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// The path of `name` inside the directory.
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace saccade::testing
