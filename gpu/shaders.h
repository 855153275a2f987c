// SPDX-License-Identifier: MIT
// The SPIR-V of shaders/*.comp, compiled by glslang at build time and
// embedded (shaders/CMakeLists.txt lists the variants; a variant is a source
// compiled with some defines).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace basalt::gpu {

struct ShaderCode {
  const char* name;
  const uint32_t* words;
  size_t n_words;
};

// nullptr if there is no shader of that name.
const ShaderCode* find_shader(std::string_view name);

}  // namespace basalt::gpu
