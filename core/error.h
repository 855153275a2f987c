// SPDX-License-Identifier: MIT
// The one error type of the engine: a message a user can act on.
#pragma once

#include <stdexcept>
#include <string>

namespace basalt {

// Thrown deep inside, caught at the edge (the command line, the server) and
// printed as one line. The message names the thing that is wrong and why,
// e.g. "tensor blk.3.attn_q.weight: offset 812345 + 4096 bytes is past the
// end of the file (800000)".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace basalt
