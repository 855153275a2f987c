#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Writes the benchmark models (random weights, real shapes) with
# tests/python/make_model.py, then checks that basalt and llama.cpp load them.
#
#   scripts/make_bench_models.sh [FOLDER]        (default build/bench-models)
#
#   tinyllama-1.1b-{q4_0,q8_0,q4_k_m}.gguf  TinyLlama-1.1B shape: n_embd 2048,
#       22 layers, 32 heads / 4 KV, n_ff 5632, vocab 32000
#   moe-8x-q4_0.gguf  Mixtral-style MoE: n_embd 1024, 8 layers, 16 heads / 4 KV,
#       8 experts, top-2, n_ff 2816, vocab 32000
#   dense-{f16,bf16}.gguf  the MoE's shapes with one FFN (156M parameters),
#       unquantized: the dense kernels, as HF folders and F16 GGUFs run them
#   qwen3moe-a3b-2l-q4_k_m.gguf  2 of Qwen3-30B-A3B's 48 blocks: n_embd 2048,
#       32 heads / 4 KV of 128 dims, 128 experts of width 768, top 8; vocab 32000
#   phi35-mini-4l-q4_k_m.gguf  4 of Phi-3.5-mini's 32 blocks: n_embd 3072, 32 heads
#       (no GQA), n_ff 8192, Q/K/V and gate/up fused, LongRoPE; vocab 32064
#
# Existing files are kept (FORCE=1 remakes them). About a minute per 1.1B
# model on one core, ~2 GB of memory; 5 GB of disk in all.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/build/bench-models}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
mkdir -p "$OUT"

TINYLLAMA=(--arch llama --n-embd 2048 --n-layer 22 --n-head 32 --n-head-kv 4 --n-ff 5632
           --vocab tiny --vocab-size 32000 --n-ctx 8192)
DENSE=(--arch llama --n-embd 1024 --n-layer 8 --n-head 16 --n-head-kv 4 --n-ff 2816
       --vocab tiny --vocab-size 32000 --n-ctx 8192)
MOE=("${DENSE[@]}" --experts 8 --experts-used 2)
PHI35=(--arch phi3 --n-embd 3072 --n-layer 4 --n-head 32 --n-head-kv 32 --n-ff 8192 --longrope 4096
       --vocab tiny --vocab-size 32064 --n-ctx 131072)
QWEN3MOE=(--arch qwen3moe --n-embd 2048 --n-layer 2 --n-head 32 --n-head-kv 4 --head-dim 128 --n-ff 768
          --experts 128 --experts-used 8 --rope-theta 1000000 --vocab tiny --vocab-size 32000 --n-ctx 8192)

write() {  # write NAME make_model-options...
  local name="$1"; shift
  local path="$OUT/$name.gguf"
  if [[ -f "$path" && "${FORCE:-0}" != 1 ]]; then
    echo "keep  $path"
  else
    local t0=$SECONDS
    "$PY" "$ROOT/tests/python/make_model.py" "$@" "$path.tmp"
    mv "$path.tmp" "$path"
    echo "made  $path ($(du -h "$path" | cut -f1), $((SECONDS - t0)) s)"
  fi
  check "$path"
}

check() {  # both engines load the file and evaluate a few tokens
  local path="$1"
  if [[ -x "$ROOT/build/bin/basalt" ]]; then
    "$ROOT/build/bin/basalt" run -m "$path" -p "The capital of France is" -n 4 --temp 0 -c 256 >/dev/null 2>&1 ||
      { echo "basalt cannot run $path:" >&2; "$ROOT/build/bin/basalt" info "$path" >&2; exit 1; }
    echo "      basalt: loads and runs"
  fi
  if "$PY" -c "import llama_cpp" 2>/dev/null; then
    "$PY" - "$path" <<'PYEOF'
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=256, verbose=False)
toks = llm.tokenize(b"The capital of France is")
llm.eval(toks)
assert llm.n_tokens == len(toks), "llama.cpp evaluated no tokens"
print(f"      llama.cpp: loads, n_vocab {llm.n_vocab()}, evaluated {len(toks)} tokens")
PYEOF
  fi
}

write tinyllama-1.1b-q4_0   "${TINYLLAMA[@]}" --type q4_0
write tinyllama-1.1b-q8_0   "${TINYLLAMA[@]}" --type q8_0
write tinyllama-1.1b-q4_k_m "${TINYLLAMA[@]}" --type mix-q4_k_m
write moe-8x-q4_0           "${MOE[@]}" --type q4_0
write dense-f16             "${DENSE[@]}" --type f16
write dense-bf16            "${DENSE[@]}" --type bf16
write qwen3moe-a3b-2l-q4_k_m "${QWEN3MOE[@]}" --type mix-q4_k_m
write phi35-mini-4l-q4_k_m  "${PHI35[@]}" --type mix-q4_k_m
