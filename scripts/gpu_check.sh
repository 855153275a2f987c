#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The checks a real GPU allows, in one run (docs/ARCHITECTURE.md, "The Vulkan
# backend"): the devices, every GPU test with the device required, the shader
# benchmarks against the device's read bandwidth, and `basalt bench` with
# each placement against the CPU on the given models (and the q8 KV cache,
# CPU and whole model, decoding at DEPTH), ending with speed-ups.
#
#   scripts/gpu_check.sh BINDIR [MODEL.gguf ...]
#
# BINDIR holds basalt, basalt_tests and basalt_gpu_bench (a build without
# oneDNN runs on a bare machine: cmake -DBASALT_ONEDNN=OFF). OUT=DIR keeps
# the logs and the bench JSON there. PP/TG/REPS/DEPTH size the runs; BENCH_FILTER
# picks shader benchmarks (a --benchmark_filter regex; default all).
#
# On a lent GPU machine (bare: no Vulkan loader, none of our packages; its
# python3 has numpy; at most 64 MiB travel, so the models are made there),
# build here and carry the binaries, the loader and the gguf wheel:
#   cmake -S . -B build-device -G Ninja -DBASALT_ONEDNN=OFF -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-device   # links only libc, libm, libstdc++, libgcc_s, libgomp
#   cp /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian* build-device/bin/   # basalt_gpu_bench's one more
#   cp the other libraries `ldd build-device/bin/basalt` finds here only (cpp-httplib, brotli, pcre2, ssl) there too
#   (cd .gl && apt-get download libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libgles2 libopengl0)
#     (the loader alone finds no driver: NVIDIA's ICD links libGLdispatch)
#   pip download --no-deps -d .whl gguf   (.gl, .whl and build-device listed in .git/info/exclude)
# then there, carrying .gl .whl build-device/bin:
#   for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
#   pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site
#   export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
#   The session tests run tests/python/make_model.py with the interpreter compiled in
#   (BASALT_PYTHON, the build's .venv/bin/python): there, a script at that path that runs
#   `exec python3 "$@"` (a symlink to a venv's python loses the venv's numpy).
#   scripts/make_bench_models.sh /tmp/models && scripts/gpu_check.sh build-device/bin /tmp/models/*.gguf
# The first such run, its figures and what it found: docs/PERFORMANCE.md 4.1.
set -uo pipefail
BIN="${1:?usage: scripts/gpu_check.sh BINDIR [MODEL.gguf ...]}"; shift
OUT="${OUT:-/tmp/gpu_check}"
PP="${PP:-512}" TG="${TG:-64}" REPS="${REPS:-3}" DEPTH="${DEPTH:-2048}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # libraries carried beside the binaries
status=0

echo "== devices"
"$BIN/basalt" info --gpus || status=1

echo "== GPU tests (device required)"
BASALT_REQUIRE_GPU=1 "$BIN/basalt_tests" --gtest_filter='Gpu*' --gtest_brief=1 2>&1 | tee "$OUT/gpu_tests.log" | tail -5
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1

echo "== shader benchmarks"
"$BIN/basalt_gpu_bench" --benchmark_filter="${BENCH_FILTER:-.}" --benchmark_min_time=0.05 --benchmark_out="$OUT/gpu_bench.json" \
  --benchmark_out_format=json 2>&1 | tee "$OUT/gpu_bench.log" || status=1

i=0
for model in "$@"; do
  i=$((i + 1))
  echo "== $model: basalt bench -p $PP -n $TG, each placement"
  for gpu in off all attn experts; do
    "$BIN/basalt" bench -m "$model" -p "$PP" -n "$TG" -r "$REPS" --gpu "$gpu" --json 2>>"$OUT/bench.err" |
      tee -a "$OUT/bench_$i.jsonl" || status=1
  done
  echo "== $model: decode at depth $DEPTH, f16 and q8 KV cache, CPU and --gpu all"
  for kv in f16 q8; do
    for gpu in off all; do
      "$BIN/basalt" bench -m "$model" -p 0 -n "$TG" --depth "$DEPTH" -r "$REPS" --gpu "$gpu" --kv-type "$kv" --json \
        2>>"$OUT/bench.err" | tee -a "$OUT/bench_$i.jsonl" || status=1
    done
  done
done

if compgen -G "$OUT/bench_*.jsonl" >/dev/null && command -v python3 >/dev/null; then
  echo "== speed-up over --gpu off (same model file, same run)"
  python3 - "$@" <<PYEOF
import json, sys
for i, model in enumerate(sys.argv[1:], 1):
    try:
        rows = [json.loads(l) for l in open(f"$OUT/bench_{i}.jsonl") if l.startswith("{")]
    except OSError:
        continue
    key = lambda r: (r.get("depth", 0), r.get("kv_type", "f16"))  # rows compare with the CPU's of the same kind
    base = {key(r): r for r in rows if r.get("gpu") == "off"}
    ratio = lambda a, b: f'{a / b:6.2f}x' if a and b else '     -'
    for r in rows:
        b = base.get(key(r))
        if b and r is not b:
            print(f'{model.split("/")[-1]:32s} --gpu {r["gpu"]:6s} kv {key(r)[1]:3s} depth {key(r)[0]:5d}'
                  f'  pp {ratio(r["pp_tokens_per_s"], b["pp_tokens_per_s"])}  tg {ratio(r["tg_tokens_per_s"], b["tg_tokens_per_s"])}'
                  f'  plan: {r.get("gpu_plan", "")}')
PYEOF
fi
exit $status
