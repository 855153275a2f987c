// SPDX-License-Identifier: MIT
// A directory of the fuzzer process's own under /tmp for the files a target
// writes, removed when the process exits (libFuzzer ends with exit(), which
// runs the destructors of statics): each CI run would otherwise leave one behind.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace basalt::fuzz {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_("/tmp/basalt-fuzz-" + name + "-" + std::to_string(getpid())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace basalt::fuzz
