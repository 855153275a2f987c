#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# basalt vs llama.cpp on every benchmark model and on SmolLM2, one table of
# ratios at the end. Each model goes through scripts/bench_vs_llamacpp.py
# (the engines alternate; medians), then decode after 4096 tokens of context
# against decode at depth 0 on the 1.1B Q4_0 model (each run measures both,
# back to back: the median of the runs' own ratios).
#
#   scripts/make_bench_models.sh              # once: build/bench-models
#   scripts/bench_all.sh [MODELS_DIR]         # 20-30 min with 2 threads, idle machine (REPS=3: 17)
#
# Environment: THREADS (2), REPS (5), P (512), N (128), DEPTH (4096; 0 skips
# the depth runs), DEPTH_REPS (3), ONLY (a regex: only models whose file name
# matches, e.g. ONLY=SmolLM2). Run it on an otherwise idle machine: the
# machines are shared and noisy, and only ratios within one run mean much.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${1:-$ROOT/build/bench-models}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
THREADS="${THREADS:-2}" REPS="${REPS:-5}" P="${P:-512}" N="${N:-128}"
DEPTH="${DEPTH:-4096}" DEPTH_REPS="${DEPTH_REPS:-3}" ONLY="${ONLY:-.}"

[[ -x "$ROOT/build/bin/basalt" ]] || { echo "build/bin/basalt is missing: build first" >&2; exit 1; }
"$PY" -c "import llama_cpp" 2>/dev/null || { echo "llama-cpp-python is missing (scripts/install-deps.sh)" >&2; exit 1; }

SMOLLM2="$("$PY" "$ROOT/scripts/default_model.py")"
MODELS=("$DIR/tinyllama-1.1b-q4_0.gguf" "$DIR/tinyllama-1.1b-q8_0.gguf" "$DIR/tinyllama-1.1b-q4_k_m.gguf"
        "$DIR/moe-8x-q4_0.gguf" "$DIR/dense-f16.gguf" "$DIR/dense-bf16.gguf" "$SMOLLM2")
DEPTH_MODEL="$DIR/tinyllama-1.1b-q4_0.gguf"

RESULTS="$(mktemp)"
trap 'rm -f "$RESULTS"' EXIT
T0=$SECONDS

# The decode roofline: read bandwidth with THREADS threads, two streams each
# (what the decode kernels use), measured now and again at the end.
bandwidth() {
  local b="$ROOT/build/bin/basalt_peaks_bench"
  [[ -x "$b" ]] || { echo 0; return; }
  BASALT_THREADS="$THREADS" "$b" --benchmark_filter="mem_read/streams:2/threads:$THREADS/" --benchmark_format=json 2>/dev/null |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["benchmarks"][0]["GB/s"])' 2>/dev/null || echo 0
}
BW0="$(bandwidth)"
echo "read bandwidth, $THREADS threads x 2 streams: $BW0 GB/s" >&2

run() {  # run MODEL bench_vs_llamacpp-options...: its report on stderr, its JSON line kept
  local model="$1"; shift
  [[ -f "$model" ]] || { echo "$model is missing: run scripts/make_bench_models.sh" >&2; exit 1; }
  echo "== $(basename "$model") $*" >&2
  "$PY" "$ROOT/scripts/bench_vs_llamacpp.py" -m "$model" -t "$THREADS" --json "$@" > "$RESULTS.one"
  grep -v '^{' "$RESULTS.one" >&2
  tail -n 1 "$RESULTS.one" >> "$RESULTS"
}

for m in "${MODELS[@]}"; do
  [[ "$(basename "$m")" =~ $ONLY ]] || continue
  run "$m" -p "$P" -n "$N" -r "$REPS"
done
if [[ "$DEPTH" != 0 && "$(basename "$DEPTH_MODEL")" =~ $ONLY ]]; then
  run "$DEPTH_MODEL" -p 0 -n 32 -d "$DEPTH" -r "$DEPTH_REPS" --vs-depth-0
fi
rm -f "$RESULTS.one"
BW1="$(bandwidth)"

echo
echo "basalt vs llama.cpp, $THREADS threads, medians ($((SECONDS - T0)) s in all)"
"$PY" - "$RESULTS" "$BW0" "$BW1" <<'PYEOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
bw = max(float(sys.argv[2]), float(sys.argv[3]))
f = lambda v: f"{v:8.1f}" if v else "       -"
r = lambda v: f"{v:6.2f}" if v else "     -"
print(f"{'model':34} {'test':>14} | {'basalt pp':>9} {'llama pp':>8} {'ratio':>6} | {'basalt tg':>9} {'llama tg':>8} {'ratio':>6}")
for x in rows:
    test = (f"pp{x['p']}" if x["p"] else "") + (" " if x["p"] and x["n"] else "") + (f"tg{x['n']}" if x["n"] else "")
    if x["d"]:
        test += f"@d{x['d']}"
    print(f"{x['model'][:34]:34} {test:>14} | {f(x['basalt_pp']):>9} {f(x['llamacpp_pp'])} {r(x['pp_ratio'])} | "
          f"{f(x['basalt_tg']):>9} {f(x['llamacpp_tg'])} {r(x['tg_ratio'])}")
if bw > 0:
    print(f"\ndecode against the roofline (read bandwidth {bw:.1f} GB/s, the better of start and end):")
    for x in rows:
        if x["n"] and not x["d"] and x.get("decode_bytes"):
            roof = bw * 1e9 / x["decode_bytes"]
            print(f"  {x['model'][:34]:34} {x['decode_bytes'] / 1e6:7.0f} MB/token, roofline {roof:6.1f} t/s: "
                  f"basalt {100 * x['basalt_tg'] / roof:3.0f}%, llama.cpp {100 * x['llamacpp_tg'] / roof:3.0f}%")
for d in (x for x in rows if "basalt_depth_ratio" in x):
    print(f"decode at depth {d['d']} / depth 0 (median of paired runs): basalt {d['basalt_depth_ratio']:.2f} "
          f"({d['basalt_tg']:.1f} vs {d['basalt_tg_d0']:.1f} t/s), llama.cpp {d['llamacpp_depth_ratio']:.2f} "
          f"({d['llamacpp_tg']:.1f} vs {d['llamacpp_tg_d0']:.1f})")
PYEOF
