#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# KV cache quality: perplexity of a text with each cache type, basalt and
# llama.cpp (through llama-cpp-python: its q8_0 and q4_0 caches, flash
# attention on, as quantized values need) on the same GGUF file, the same
# windows (ctx tokens, stride ctx / 2, every token after the first scored
# once: basalt perplexity's scheme), each against its own f16 cache.
#
#   .venv/bin/python scripts/kv_quality.py [-m MODEL.gguf] [-f TEXT] [--ctx 512] [--no-llama]
#
# llama-cpp-python is not in the project's venv by default (see
# scripts/bench_vs_llamacpp.py for how to build it for this CPU).
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/python"))
import perplexity_windows  # noqa: E402  (basalt perplexity's windows)
BASALT_TYPES = ["f16", "q8", "q4", "k8v4"]
LLAMA_TYPES = {"f16": (1, 1), "q8_0": (8, 8), "q4_0": (2, 2), "k q8_0, v q4_0": (8, 2)}  # ggml type ids (K, V)


def basalt_ppl(args, kv_type):
    out = subprocess.run([args.basalt, "perplexity", "-m", args.model, "-f", args.file, "--ctx", str(args.ctx),
                          "--kv-type", kv_type, "--json", "-t", str(args.threads)],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["perplexity"], r["tokens"]


def llama_ppl(args, type_k, type_v):
    from llama_cpp import Llama
    llm = Llama(model_path=args.model, n_ctx=args.ctx, n_batch=args.ctx, n_threads=args.threads, logits_all=True,
                type_k=type_k, type_v=type_v, flash_attn=True, verbose=False)
    tokens = llm.tokenize(Path(args.file).read_bytes(), add_bos=True, special=False)

    def logits_of(window):
        llm.reset()
        llm.eval(window)
        return llm.scores[: len(window)]

    ppl, _ = perplexity_windows.perplexity(tokens, args.ctx, args.ctx // 2, logits_of)
    del llm
    return ppl, len(tokens)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-m", "--model", default="")
    ap.add_argument("-f", "--file", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--basalt", default=str(ROOT / "build/bin/basalt"))
    ap.add_argument("--no-llama", action="store_true")
    args = ap.parse_args()
    if not args.model:
        args.model = subprocess.check_output([sys.executable, str(ROOT / "scripts/default_model.py")], text=True).strip()
    print(f"# {Path(args.model).name}, {Path(args.file).name}, ctx {args.ctx}, stride {args.ctx // 2}")
    print("| engine | cache | tokens | perplexity | vs its f16 |\n| --- | --- | --- | --- | --- |")
    base = None
    for t in BASALT_TYPES:
        ppl, n = basalt_ppl(args, t)
        base = base or ppl
        print(f"| basalt | {t} | {n} | {ppl:.4f} | {100 * (ppl / base - 1):+.2f}% |", flush=True)
    if args.no_llama:
        return
    base = None
    for name, (tk, tv) in LLAMA_TYPES.items():
        ppl, n = llama_ppl(args, tk, tv)
        base = base or ppl
        print(f"| llama.cpp | {name} | {n} | {ppl:.4f} | {100 * (ppl / base - 1):+.2f}% |", flush=True)


if __name__ == "__main__":
    main()
