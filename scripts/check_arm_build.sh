#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cross-builds basalt for aarch64 (the NEON and SDOT kernels; oneDNN off, and
# Vulkan, whose shaders are the x86 build's and which nothing here runs) and,
# under qemu-user: runs the kernel tests (the qa matmul, attention and row
# kernels of every ARM ISA against the reference) and whole synthetic models
# against the numpy reference on an emulated core with SDOT (qemu's `max`),
# then generates text on the default model with the best
# kernels of that core and of one without SDOT (Cortex-A72), which must be the
# native build's text. Run by scripts/test.sh
# (ARM=0 skips it). Needs root or sudo for apt-get.
#   scripts/check_arm_build.sh [BUILD_DIR]   (default build-arm)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/build-arm}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then $SUDO dpkg --add-architecture arm64; fi
# The arm64 libraries the build links (cpp-httplib for `basalt serve`, with its OpenSSL, zlib and brotli;
# GoogleTest; libgomp), from Debian's arm64 architecture: qemu runs the binaries on them (its
# loader is /lib/ld-linux-aarch64.so.1). The cross toolchain's own libc (/usr/aarch64-linux-gnu,
# QEMU_LD_PREFIX) hangs in pthread_create under Debian 12's qemu-user.
ARM_LIBS="libpcre2-dev:arm64 libcpp-httplib-dev:arm64 libgtest-dev:arm64 libgomp1:arm64"
if ! dpkg-query -W -f='${Status}\n' $ARM_LIBS 2>/dev/null | grep -c "install ok installed" | grep -qx 4; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    g++-aarch64-linux-gnu qemu-user $ARM_LIBS
fi
mkdir -p "$OUT"
cat > "$OUT/aarch64.cmake" <<TOOLCHAIN
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
TOOLCHAIN
PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
  cmake -S "$ROOT" -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$OUT/aarch64.cmake" \
  -DBASALT_BUILD_TESTS=ON -DBASALT_BUILD_BENCH=OFF -DBASALT_ONEDNN=OFF -DBASALT_VULKAN=OFF >/dev/null
cmake --build "$OUT" --target basalt basalt-dump-logits basalt_kernel_tests -j "$(nproc)"
# The SDOT objects export no weak code that baseline callers could be linked to (as on x86).
"$ROOT/.venv/bin/python" "$ROOT/tests/python/check_isa_objects.py" $(find "$OUT" -name '*_dotprod.cpp.o')
# CPU: a qemu model; the rest are the command.
run_arm() { local cpu="$1"; shift; qemu-aarch64 -cpu "$cpu" "$@"; }
# The kernels of every ARM ISA (the emulated core has them all: a skip fails, tests/unit/isa_testing.h),
# against the reference. What does not depend on the ISA runs in the native suite: the scalar
# cases, and the attention driver's rings and single thread (shared with x86; 80 s under qemu).
# qemu runs one core's instructions: two processes, the attention reference (half the 130 s) beside the rest.
kernel_tests() {
  BASALT_REQUIRE_ISA=neon,dotprod run_arm max "$OUT/bin/basalt_kernel_tests" --gtest_brief=1 --gtest_filter="$1" \
    > "$OUT/kernel-tests-$2.log" 2>&1 || { cat "$OUT/kernel-tests-$2.log"; echo "check_arm_build: kernel tests ($2) failed" >&2; return 1; }
}
kernel_tests 'AttentionIsa.MatchesReference/*:-*/scalar' attention & attention=$!
kernel_tests 'MatmulIsa.*:AttentionIsa.*:RowKernelsIsa.*:RowKernels.*:-*/scalar:AttentionIsa.MatchesReference/*:AttentionIsa.RingsGiveTheWholeCachesOutput/*:AttentionIsa.OneThreadMatchesReference/*' rest
wait "$attention"
cat "$OUT"/kernel-tests-*.log
# Whole synthetic models against the numpy reference (tests/python/check_forward.py, as the native
# suite's forward.* cases): every weight format, MoE, GQA, RoPE scalings, Gemma 2 and 3, each KV
# cache type, a window with sinks; the ARM build's logits through qemu on the SDOT core.
printf '#!/bin/sh\nexec qemu-aarch64 -cpu max "%s" "$@"\n' "$OUT/bin/basalt-dump-logits" > "$OUT/dump-logits-qemu"
chmod +x "$OUT/dump-logits-qemu"
forward_case() {
  "$ROOT/.venv/bin/python" "$ROOT/tests/python/check_forward.py" --dump-logits "$OUT/dump-logits-qemu" --case "$1" \
    > "$OUT/forward-$1.log" 2>&1 || { cat "$OUT/forward-$1.log"; echo "check_arm_build: forward case $1 failed" >&2; return 1; }
}
export -f forward_case; export ROOT OUT
printf '%s\n' llama_f16 llama_bf16 llama_q4_0 llama_q4_1 llama_q8_0 llama_q4_k llama_q5_k llama_q6_k llama_mix_q4_k_m \
  llama_tied_q4_k llama_moe4_top2_q4_0 qwen2_gqa4_q4_1 llama_hd32_explicit_f32 llama_rope_llama3_f32 \
  qwen2_rope_yarn4_q8_0 gemma2_q4_k_hd64 gemma3_f32 kv_q8_llama_hd64_f32_runs_of_7 \
  kv_q4_llama_hd64_f32_runs_of_7 kv_k8v4_llama_hd64_f32_runs_of_7 llama_q8_0_window40_sinks4 |
  xargs -P "$(nproc)" -I{} bash -c 'forward_case {}'
echo "check_arm_build: the forward cases match the numpy reference"
MODEL="$("$ROOT/.venv/bin/python" "$ROOT/scripts/default_model.py")"
ARGS=(run -m "$MODEL" -p "The capital of France is" -n 8 --temp 0 -t 2 -c 64)
native="$("$ROOT/build/bin/basalt" "${ARGS[@]}" 2>/dev/null)"
# The core's best kernels, found at run time: SDOT on `max`, plain NEON on the A72.
for run in max:dotprod cortex-a72:neon; do
  cpu="${run%%:*}" want="${run##*:}" log="$OUT/run-${run%%:*}.log"
  arm="$(run_arm "$cpu" "$OUT/bin/basalt" "${ARGS[@]}" 2>"$log")"
  isa="$(grep -o '[a-z0-9]* kernels' "$log" | head -1 || true)"
  echo "aarch64 ($cpu, ${isa:-no kernels named}): '$arm'  native: '$native'"
  [ "$isa" = "$want kernels" ] || { echo "check_arm_build: $cpu should run the $want kernels" >&2; exit 1; }
  [ "$arm" = "$native" ] || { echo "check_arm_build: the aarch64 build ($cpu) generates other text" >&2; exit 1; }
done
echo "check_arm_build: ok"
