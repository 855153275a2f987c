#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets (tests/fuzz/, clang with ASan + UBSan) and runs
# each for SECONDS (default 60), then prints executions, coverage, corpus size,
# crashes, and the slowest corpus input and most time per KB (fuzz_slowest.py)
# per target. Corpora persist in $FUZZ_DIR/corpus/TARGET (default
# build-fuzz/work), so runs add up; crashes land in $FUZZ_DIR/crashes/TARGET.
#
#   scripts/fuzz.sh [SECONDS]        ONLY=REGEX picks targets; JOBS=N builds with N jobs; FUZZ_JOBS=N
#                                    runs N targets at once (the CPUs by default);
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

"$root/scripts/fuzz_tree.sh" "$build"
cmake --build "$build" --target fuzzers -j "${JOBS:-2}"

# ---- seeds (each target's made once, when its folder is missing)
seeds=$work/seeds gen=$work/seeds/generated
if [ ! -f "$gen/done" ]; then
  mkdir -p "$gen"
  mm() { "$py" "$root/tests/python/make_model.py" "$@" >/dev/null; }
  mm "$gen/llama_q4_0.gguf" --vocab tiny --type q4_0
  mm "$gen/llama_f16.gguf" --vocab tiny --type f16 --tied
  mm "$gen/qwen2_q8_0.gguf" --arch qwen2 --vocab tiny --type q8_0
  mm "$gen/moe_q4_k.gguf" --vocab tiny --type q4_k --n-embd 256 --n-ff 512 --experts 4
  # whole models under the 64 KB input limit, so that mutations reach Model::load
  small=(--vocab tiny --n-embd 32 --n-layer 1 --n-ff 64 --n-head 2 --n-head-kv 1)
  mm "$gen/small_q4_0.gguf" "${small[@]}" --type q4_0
  mm "$gen/small_f16.gguf" "${small[@]}" --type f16 --tied
  mm "$gen/small_gemma3_f16.gguf" "${small[@]}" --arch gemma3 --type f16 --tied --window 4 --swa-period 2
  "$py" "$root/tests/python/make_hf_folder.py" "$gen/llama_f16.gguf" "$gen/hf" >/dev/null
  "$py" "$root/tests/python/make_hf_folder.py" "$gen/small_f16.gguf" "$gen/hf_small" >/dev/null
  "$py" "$root/tests/python/make_hf_folder.py" "$gen/small_f16.gguf" "$gen/hf_shards" --shards 2 >/dev/null
  "$py" "$root/tests/python/make_hf_folder.py" "$gen/small_gemma3_f16.gguf" "$gen/hf_gemma3" --multimodal new >/dev/null
  "$py" "$root/tests/python/make_gptq.py" "$gen/hf_small" "$gen/gptq_act_asym" --group-size 32 --act-order --asym >/dev/null
  "$py" "$root/tests/python/make_gptq.py" "$gen/hf_small" "$gen/gptq8_qc" --bits 8 --group-size -1 \
    --config-in quantize_config --format gptq_v2 >/dev/null
  touch "$gen/done"
fi
seed() {  # seed TARGET: make TARGET's seed folder unless it exists
  local d=$seeds/$1
  [ -d "$d" ] && return
  mkdir -p "$d"
  case $1 in
    gguf) cp "$gen"/*.gguf "$d/" ;;
    safetensors) cp "$gen/hf/model.safetensors" "$gen/hf_shards/"*.safetensors "$d/"
      cp "$gen/gptq_act_asym/model.safetensors" "$d/gptq.safetensors" ;;
    hf_config) cp "$gen"/hf/*config*.json "$d/"  # config.json, generation_ and tokenizer_config.json
      cp "$gen/gptq_act_asym/config.json" "$d/gptq_config.json"; cp "$gen/gptq8_qc/quantize_config.json" "$d/"
      cp "$gen/hf_gemma3/config.json" "$d/gemma3_multimodal_config.json" ;;
    hf_folder)  # each folder packed as the target reads it: "\n#FILE name\n" + bytes per file
      for f in hf_small hf_shards gptq_act_asym gptq8_qc hf_gemma3; do
        "$py" -c 'import sys, pathlib
out = sys.stdout.buffer
for p in sorted(pathlib.Path(sys.argv[1]).iterdir()):
    out.write(b"\n#FILE " + p.name.encode() + b"\n" + p.read_bytes())' "$gen/$f" >"$d/$f"
      done ;;
    gptq)  # flags, n_in, n_out, group size + fault; then tensor bytes
      "$py" -c 'import sys; sys.stdout.buffer.write(bytes([0, 3, 2, 1]) + bytes(range(256)) * 8)' >"$d/g32"
      "$py" -c 'import sys; sys.stdout.buffer.write(bytes([9, 1, 5, 0]) + bytes(4096))' >"$d/g_idx_zero" ;;
    jinja) cp "$root"/tests/data/chat/templates/* "$d/" ;;
    tokenizer)
      printf '\0Hello, world! <|im_start|>user\n\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80  \t\n' >"$d/text"
      printf '\x20Hello, world!\r\n123 4567 don'"'"'t' >"$d/plain"
      head -c 2000 "$root/README.md" | sed '1s/^/\x10/' >"$d/readme" ;;
    tokenizer_json) cp "$gen/hf/tokenizer.json" "$d/" ;;
    openai_request)
      printf '\x01\x00{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0.7,"top_p":0.9,"stop":["\\n"],"stream":true,"stream_options":{"include_usage":true},"logit_bias":{"12":-100},"seed":3,"chat_template_kwargs":{"enable_thinking":false}}' \
        >"$d/chat"
      printf '\x00\x00{"prompt":"Once upon","max_tokens":16,"top_k":40,"min_p":0.05,"presence_penalty":0.5,"frequency_penalty":0.5,"repetition_penalty":1.1,"n":1}' \
        >"$d/completion"
      printf '\x01\x00{"messages":[{"role":"user","content":"A book"}],"response_format":{"type":"json_schema","json_schema":{"name":"b","strict":true,"schema":{"type":"object","properties":{"t":{"type":"string"},"y":{"type":"integer"}},"required":["t"]}}}}' \
        >"$d/response_format"
      printf '\x01\x00{"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\\"city\\":\\"Oslo\\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}],"tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"tool_choice":"auto","parallel_tool_calls":false}' \
        >"$d/tools"
      # the same, for a Hermes template and a Llama 3 one (second byte: their ToolStyle bits)
      printf '\x01\x0f{"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\\"city\\":\\"Oslo\\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}],"tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"tool_choice":"auto","parallel_tool_calls":false}' \
        >"$d/tools_hermes"
      printf '\x01\x16{"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\\"city\\":\\"Oslo\\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}],"tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"tool_choice":"auto","parallel_tool_calls":false}' \
        >"$d/tools_llama3"
      printf '\x00\x00{"prompt":[[1,2,3],[4]],"n":2,"echo":true,"logprobs":1,"max_tokens":0,"seed":5}' >"$d/choices" ;;
    json_schema)  # a schema, then NUL and text to follow through its grammar
      printf '{"$defs":{"a":{"type":"object","properties":{"n":{"type":["string","null"],"maxLength":4},"k":{"type":"array","items":{"$ref":"#/$defs/a"},"maxItems":2}},"required":["n"],"additionalProperties":false}},"$ref":"#/$defs/a"}\0{"n": "ab", "k": [{"n": null}]}' >"$d/recursive"
      printf '{"type":"object","properties":{"e":{"enum":["x","xy",3,null]},"d":{"type":"string","format":"date-time"},"t":{"prefixItems":[{"const":1},{"type":"boolean"}],"items":false},"a":{"anyOf":[{"type":"integer"},{"additionalProperties":{"type":"number"}}]}}}\0{"e": "xy", "d": "2026-12-07T10:00:00Z", "t": [1, true]}' >"$d/keywords" ;;
    gbnf)  # a grammar, then NUL and text to follow through it
      printf 'root ::= "[" ws (item ("," ws item)*)? "]"\nitem ::= [a-z\\u00e9-\\U0001F600]{1,8} | "\\"" [^"\\\\\\x00-\\x1F]* "\\""  # comment\nws ::= | " " | "\\n" [ \\t]{0,4}\n\0[ab, "x\xc3\xa9"]' >"$d/list"
      printf 'root ::= (\n  expr "=" ws term "\\n"\n)+\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]+ |\n  "(" expr ")"\nws ::= [ ]?\n\0(1+2)= 3\n' >"$d/arithmetic" ;;
    *) echo "fuzz.sh: no seeds for $1" >&2 ;;
  esac
}
tok_gguf=$seeds/generated/llama_q4_0.gguf
default_gguf=$("$py" "$root/scripts/default_model.py" 2>/dev/null || true)
[ -n "$default_gguf" ] && [ -f "$default_gguf" ] && tok_gguf=$tok_gguf:$default_gguf

# ---- runs: the targets $(nproc) at a time (each is one process), rows printed in order at the end
run_target() {
  local name=$1 bin=$build/bin/fuzz_$1
  seed "$name"
  local corpus=$work/corpus/$name crashes=$work/crashes/$name log=$work/logs/$name.log
  mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
  local started=$work/logs/$name.started
  touch "$started"
  local opts=()
  [ -f "$root/tests/fuzz/$name.dict" ] && opts+=(-dict="$root/tests/fuzz/$name.dict")
  [ -n "${FUZZ_SEED:-}" ] && opts+=(-seed="$FUZZ_SEED")
  [ -n "${FUZZ_RUNS:-}" ] && opts+=(-runs="$FUZZ_RUNS")
  local regressions=()  # inputs that once crashed a target (tests/data/fuzz): replayed first by every run
  [ -d "$root/tests/data/fuzz/$name" ] && regressions=("$root/tests/data/fuzz/$name")
  local max_len=65536 failed=0
  [ "$name" = hf_folder ] && max_len=131072  # a whole (small) model folder
  BASALT_FUZZ_GGUF=$tok_gguf "$bin" "$corpus" "$seeds/$name" "${regressions[@]}" "${opts[@]}" -max_total_time="$secs" -max_len=$max_len \
    -rss_limit_mb=4096 -timeout=10 -artifact_prefix="$crashes/" -print_final_stats=1 >"$log" 2>&1 || failed=1
  local execs cov n_corpus n_crash slow_ms slow_size ms_per_kb
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  n_corpus=$(find "$corpus" -type f | wc -l)
  n_crash=$(find "$crashes" -type f -newer "$started" | wc -l)  # this run's
  # every corpus input timed once: the slowest, and the most time per byte (super-linear paths)
  read -r slow_ms slow_size ms_per_kb < <(BASALT_FUZZ_GGUF=$tok_gguf "$py" "$root/scripts/fuzz_slowest.py" "$bin" "$corpus")
  printf '%-16s %12s %8s %8s %8s %8s %12s %8s\n' "$name" "$execs" "$(echo "$cov" | awk '{print $2}')" \
    "$(echo "$cov" | awk '{print $4}')" "$n_corpus" "$n_crash" "$slow_ms ($slow_size B)" "$ms_per_kb" >"$work/logs/$name.row"
  echo "$failed" >"$work/logs/$name.failed"
}
names=()
for bin in "$build"/bin/fuzz_*; do
  name=$(basename "$bin"); name=${name#fuzz_}
  [[ -n "${ONLY:-}" && ! "$name" =~ $ONLY ]] && continue
  names+=("$name")
done
for name in "${names[@]}"; do
  rm -f "$work/logs/$name.row" "$work/logs/$name.failed"
  run_target "$name" &
  while [ "$(jobs -rp | wc -l)" -ge "${FUZZ_JOBS:-$(nproc)}" ]; do wait -n || true; done
done
wait
printf '%-16s %12s %8s %8s %8s %8s %12s %8s\n' target executions cov features corpus crashes 'slowest ms' 'ms/KB'
status=0
for name in "${names[@]}"; do
  cat "$work/logs/$name.row" 2>/dev/null || echo "$name: no result (see $work/logs/$name.log)"
  [ "$(cat "$work/logs/$name.failed" 2>/dev/null)" = 0 ] || status=1
done
exit $status
