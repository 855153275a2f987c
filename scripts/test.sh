#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what the tests need, builds, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
# The Vulkan tests run on Mesa's lavapipe (installed above): a missing device is a failure here, not a skip.
BASALT_REQUIRE_GPU=1 ctest --test-dir build --output-on-failure -j "$(nproc)"
