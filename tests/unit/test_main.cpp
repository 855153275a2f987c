// SPDX-License-Identifier: MIT
// The test binary's main: the engine assembled as the tools assemble it.
#include <gtest/gtest.h>

#include "core/engine/builtin_backends.h"

int main(int argc, char** argv) {
  basalt::register_builtin_backends();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
