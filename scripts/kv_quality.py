#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# KV cache quality: perplexity of a text with each cache type, basalt and
# llama.cpp (through llama-cpp-python: its q8_0 and q4_0 caches, flash
# attention on, as quantized values need) on the same GGUF file, the same
# windows (ctx tokens, stride ctx / 2, every token after the first scored
# once: basalt perplexity's scheme), each against its own f16 cache: the
# perplexity, and the mean KL divergence of the next-token distributions from
# the f16 cache's (basalt perplexity --kl-base f16; for llama.cpp computed
# here from both caches' logits), with the share of tokens whose most likely
# next token stays the same.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/python"))
import perplexity_windows  # noqa: E402  (basalt perplexity's windows)
BASALT_TYPES = ["f16", "q8", "q4", "k8v4"]
LLAMA_TYPES = {"f16": (1, 1), "q8_0": (8, 8), "q4_0": (2, 2), "k q8_0, v q4_0": (8, 2)}  # ggml type ids (K, V)


def basalt_ppl(args, kv_type):
    """(perplexity, tokens, KL mean or None, same top or None)"""
    kl = [] if kv_type == "f16" else ["--kl-base", "f16"]
    out = subprocess.run([args.basalt, "perplexity", "-m", args.model, "-f", args.file, "--ctx", str(args.ctx),
                          "--kv-type", kv_type, "--json", "-t", str(args.threads), *kl],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["perplexity"], r["tokens"], r.get("kl_mean"), r.get("same_top")


def llama_logits(args, type_k, type_v):
    """(tokens, logits_of(window)) of a llama.cpp context with that cache."""
    from llama_cpp import Llama
    llm = Llama(model_path=args.model, n_ctx=args.ctx, n_batch=args.ctx, n_threads=args.threads, logits_all=True,
                type_k=type_k, type_v=type_v, flash_attn=True, verbose=False)
    tokens = llm.tokenize(Path(args.file).read_bytes(), add_bos=True, special=False)

    def logits_of(window):
        llm.reset()
        llm.eval(window)
        return np.array(llm.scores[: len(window)])
    return tokens, logits_of


def llama_rows(args):
    """(cache, perplexity, tokens, KL mean or None, same top or None) of each llama.cpp cache;
    the f16 context, loaded once, is every other's base."""
    tokens, base = llama_logits(args, *LLAMA_TYPES["f16"])
    yield "f16", perplexity_windows.perplexity(tokens, args.ctx, args.ctx // 2, base)[0], len(tokens), None, None
    for name, (type_k, type_v) in LLAMA_TYPES.items():
        if name != "f16":
            kl, same, ppl = perplexity_windows.kl_divergence(tokens, args.ctx, args.ctx // 2, base,
                                                             llama_logits(args, type_k, type_v)[1])
            yield name, ppl, len(tokens), kl.mean(), same


def row(engine, cache, ppl, n, base, kl, same):
    kl_text = f"{kl:.5f} | {100 * same:.2f}%" if kl is not None else "| "
    return f"| {engine} | {cache} | {n} | {ppl:.4f} | {100 * (ppl / base - 1):+.2f}% | {kl_text} |"


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
    print("| engine | cache | tokens | perplexity | vs its f16 | KL from its f16 | same top token |\n"
          "| --- | --- | --- | --- | --- | --- | --- |")
    base = None
    for t in BASALT_TYPES:
        ppl, n, kl, same = basalt_ppl(args, t)
        base = base or ppl
        print(row("basalt", t, ppl, n, base, kl, same), flush=True)
    if args.no_llama:
        return
    base = None
    for name, ppl, n, kl, same in llama_rows(args):
        base = base or ppl
        print(row("llama.cpp", name, ppl, n, base, kl, same), flush=True)


if __name__ == "__main__":
    main()
