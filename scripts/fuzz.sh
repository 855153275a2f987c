#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets (tests/fuzz/, clang with ASan + UBSan) and runs
# each for SECONDS (default 60), then prints executions, coverage, corpus size
# and crashes per target. Corpora persist in $FUZZ_DIR/corpus/TARGET (default
# build-fuzz/work), so runs add up; crashes land in $FUZZ_DIR/crashes/TARGET.
#
#   scripts/fuzz.sh [SECONDS]        ONLY=REGEX picks targets; JOBS=N builds with N jobs;
#                                    FUZZ_SEED=N and FUZZ_RUNS=N (inputs per target, SECONDS
#                                    still the cap) repeat a run exactly (CI's: scripts/test.sh)
#
# Seeds come from the project's own generators (tests/python: synthetic GGUF
# models and HF folders), its chat templates (tests/data/chat/templates) and
# a few request bodies written here. A crash's input is a regression test to
# add to tests/data (docs/FUZZING.md).
set -euo pipefail
secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-fuzz}
work=${FUZZ_DIR:-$build/work}
py=$root/.venv/bin/python
[ -x "$py" ] || { echo "fuzz.sh: run scripts/install-deps.sh first (.venv)" >&2; exit 2; }

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBASALT_FUZZ=ON \
  -DBASALT_BUILD_TESTS=OFF -DBASALT_BUILD_BENCH=OFF -DBASALT_VULKAN=OFF -DBASALT_ONEDNN=OFF >/dev/null
cmake --build "$build" --target fuzzers -j "${JOBS:-2}"

# ---- seeds (made once)
seeds=$work/seeds
if [ ! -d "$seeds" ]; then
  mkdir -p "$seeds"/{gguf,safetensors,hf_config,jinja,tokenizer,tokenizer_json,openai_request}
  gen=$seeds/generated
  mkdir -p "$gen"
  "$py" "$root/tests/python/make_model.py" "$gen/llama_q4_0.gguf" --vocab tiny --type q4_0 >/dev/null
  "$py" "$root/tests/python/make_model.py" "$gen/llama_f16.gguf" --vocab tiny --type f16 --tied >/dev/null
  "$py" "$root/tests/python/make_model.py" "$gen/qwen2_q8_0.gguf" --arch qwen2 --vocab tiny --type q8_0 >/dev/null
  "$py" "$root/tests/python/make_model.py" "$gen/moe_q4_k.gguf" --vocab tiny --type q4_k --n-embd 256 --n-ff 512 \
    --experts 4 >/dev/null
  cp "$gen"/*.gguf "$seeds/gguf/"
  "$py" "$root/tests/python/make_hf_folder.py" "$gen/llama_f16.gguf" "$gen/hf" >/dev/null
  cp "$gen/hf/model.safetensors" "$seeds/safetensors/"
  cp "$gen/hf/tokenizer.json" "$seeds/tokenizer_json/"
  cp "$gen"/hf/*config*.json "$seeds/hf_config/"  # config.json, generation_ and tokenizer_config.json
  cp "$root"/tests/data/chat/templates/* "$seeds/jinja/"
  printf '\0Hello, world! <|im_start|>user\n\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80  \t\n' >"$seeds/tokenizer/text"
  printf '\x20Hello, world!\r\n123 4567 don'"'"'t' >"$seeds/tokenizer/plain"
  head -c 2000 "$root/README.md" | sed '1s/^/\x10/' >"$seeds/tokenizer/readme"
  printf '\x01{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0.7,"top_p":0.9,"stop":["\\n"],"stream":true,"stream_options":{"include_usage":true},"logit_bias":{"12":-100},"seed":3}' \
    >"$seeds/openai_request/chat"
  printf '\x00{"prompt":"Once upon","max_tokens":16,"top_k":40,"min_p":0.05,"presence_penalty":0.5,"frequency_penalty":0.5,"repetition_penalty":1.1,"n":1}' \
    >"$seeds/openai_request/completion"
fi
tok_gguf=$seeds/generated/llama_q4_0.gguf
default_gguf=$("$py" "$root/scripts/default_model.py" 2>/dev/null || true)
[ -n "$default_gguf" ] && [ -f "$default_gguf" ] && tok_gguf=$tok_gguf:$default_gguf

# ---- runs
printf '%-16s %12s %8s %8s %8s %s\n' target executions cov features corpus crashes
status=0
for bin in "$build"/bin/fuzz_*; do
  name=$(basename "$bin"); name=${name#fuzz_}
  [[ -n "${ONLY:-}" && ! "$name" =~ $ONLY ]] && continue
  corpus=$work/corpus/$name crashes=$work/crashes/$name log=$work/logs/$name.log
  mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
  started=$work/logs/$name.started
  touch "$started"
  opts=()
  [ -f "$root/tests/fuzz/$name.dict" ] && opts+=(-dict="$root/tests/fuzz/$name.dict")
  [ -n "${FUZZ_SEED:-}" ] && opts+=(-seed="$FUZZ_SEED")
  [ -n "${FUZZ_RUNS:-}" ] && opts+=(-runs="$FUZZ_RUNS")
  regressions=()  # inputs that once crashed a target (tests/data/fuzz): replayed first by every run
  [ -d "$root/tests/data/fuzz/$name" ] && regressions=("$root/tests/data/fuzz/$name")
  BASALT_FUZZ_GGUF=$tok_gguf "$bin" "$corpus" "$seeds/$name" "${regressions[@]}" "${opts[@]}" -max_total_time="$secs" -max_len=65536 \
    -rss_limit_mb=4096 -timeout=10 -artifact_prefix="$crashes/" -print_final_stats=1 >"$log" 2>&1 || status=1
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  n_corpus=$(find "$corpus" -type f | wc -l)
  n_crash=$(find "$crashes" -type f -newer "$started" | wc -l)  # this run's
  printf '%-16s %12s %8s %8s %8s %s\n' "$name" "$execs" "$(echo "$cov" | awk '{print $2}')" "$(echo "$cov" | awk '{print $4}')" \
    "$n_corpus" "$n_crash"
done
exit $status
