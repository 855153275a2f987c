#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs everything, builds basalt, and asks the default model a question.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
./build/bin/basalt run --chat -p "${1:-What is the capital of France? Answer in one sentence.}" -n 64 --temp 0
