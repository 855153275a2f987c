// SPDX-License-Identifier: MIT
// Token ids as test messages print them: "1 2 3".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace basalt::test {

inline std::string show_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

}  // namespace basalt::test
