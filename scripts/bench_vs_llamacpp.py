#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# basalt vs llama.cpp on the same GGUF file, in one run: alternates the two
# engines (prefill of P random tokens, decode of N tokens after D of context),
# reports medians and the ratio. llama.cpp runs through llama-cpp-python
# (pip install llama-cpp-python, built from source for this CPU).
#
#   scripts/bench_vs_llamacpp.py [-m MODEL] [-p 512] [-n 128] [-d 0] [-t 2] [-r 5] [--json]
#   scripts/bench_vs_llamacpp.py -p 0 -n 32 -d 4096 --vs-depth-0 ...
#
# --vs-depth-0: each run also decodes at depth 0 right before (odd runs:
# right after) the run at depth D, and the report adds decode at D / decode at 0 per engine (the
# median of each run's own ratio: the pairs share the machine's state, which
# on a shared machine drifts by more than the difference looked for).
#
# On CPUs that report AMX without the kernel enabling it (this machine kind),
# a GGML_NATIVE build dies (SIGILL; SIGSEGV on an Intel Xeon on 2026-12-02); build llama-cpp-python like this:
#   CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
#     -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX512_VBMI=ON
#     -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" pip install llama-cpp-python
#
# AVX2 against AVX2 (issue 3's floor for CPUs without AVX-512): llama-cpp-python
# built without AVX-512 into its own folder, basalt forced to its AVX2 kernels:
#   CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
#     -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
#     pip install --no-deps --target /opt/llama-avx2 llama-cpp-python
#   BASALT_ISA=avx2 PYTHONPATH=/opt/llama-avx2 scripts/bench_vs_llamacpp.py -m MODEL
#
# -p 0 or -n 0 skips that part; --json adds one JSON line with the medians.
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def basalt(args, model, depth=None):
    depth = args.d if depth is None else depth
    cmd = [str(ROOT / "build/bin/basalt"), "bench", "-m", model, "-p", str(args.p), "-n", str(args.n),
           "-d", str(depth), "-t", str(args.t), "-r", "1", "--json"]
    out = json.loads(subprocess.check_output(cmd, text=True).strip().splitlines()[-1])
    basalt.decode_bytes = out["decode_bytes"]  # weight bytes one decode step streams
    return out["pp_tokens_per_s"], out["tg_tokens_per_s"]


class LlamaCpp:
    def __init__(self, args, model):
        from llama_cpp import Llama
        self.args = args
        self.llm = Llama(model_path=model, n_ctx=max(args.p, args.d + args.n) + 8, n_batch=512, n_ubatch=512,
                         n_threads=args.t, n_threads_batch=args.t, verbose=False, logits_all=False)
        self.n_vocab = self.llm.n_vocab()

    def run(self, depth=None):
        depth = self.args.d if depth is None else depth
        rnd = random.Random(1)
        toks = lambda k: [rnd.randrange(self.n_vocab) for _ in range(k)]
        pp = 0.0
        if self.args.p:
            self.llm.reset()
            t0 = time.perf_counter()
            self.llm.eval(toks(self.args.p))
            pp = self.args.p / (time.perf_counter() - t0)
        self.llm.reset()
        if depth:
            self.llm.eval(toks(depth))
        t0 = time.perf_counter()
        for t in toks(self.args.n):
            self.llm.eval([t])
        tg = self.args.n / (time.perf_counter() - t0) if self.args.n else 0.0
        return pp, tg


def main():
    ap = argparse.ArgumentParser(description="basalt vs llama.cpp on the same GGUF file")
    ap.add_argument("-m", "--model", default="")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-d", type=int, default=0)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="also print one JSON line with the medians")
    ap.add_argument("--vs-depth-0", action="store_true",
                    help="also decode at depth 0 in each run and report decode at D / at 0 (median of the runs' ratios)")
    args = ap.parse_args()
    if args.vs_depth_0 and (args.p or not args.n or not args.d):
        ap.error("--vs-depth-0 needs -p 0, -n > 0 and -d > 0")
    model = args.model or subprocess.check_output([sys.executable, str(ROOT / "scripts/default_model.py")], text=True).strip()
    ref = LlamaCpp(args, model)
    ref.run()  # warm-up
    basalt(args, model)
    res = {"basalt": ([], []), "llama.cpp": ([], [])}
    flat = {"basalt": [], "llama.cpp": []}  # --vs-depth-0: decode at depth 0, run by run
    for rep in range(args.r):
        for name, fn in (("basalt", lambda d=None: basalt(args, model, d)), ("llama.cpp", ref.run)):
            if args.vs_depth_0 and rep % 2 == 0:  # depth 0 first on even runs, last on odd ones
                flat[name].append(fn(0)[1])
            pp, tg = fn()
            if args.vs_depth_0 and rep % 2 == 1:
                flat[name].append(fn(0)[1])
            res[name][0].append(pp)
            res[name][1].append(tg)
    med = {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in res.items()}
    print(f"model {Path(model).name}, {args.t} threads, pp{args.p}, tg{args.n} at depth {args.d}, {args.r} alternating runs, medians")
    print(f"{'engine':10} {'prefill t/s':>12} {'decode t/s':>12}")
    for k, (pp, tg) in med.items():
        print(f"{k:10} {pp:12.1f} {tg:12.1f}")
    b, l = med["basalt"], med["llama.cpp"]
    ratio = [b[i] / l[i] if l[i] else 0.0 for i in (0, 1)]
    print(f"{'ratio':10} {ratio[0]:12.2f} {ratio[1]:12.2f}")
    deep = {}
    if args.vs_depth_0:
        for k in res:
            ratios = [d / z if z else 0.0 for d, z in zip(res[k][1], flat[k])]
            deep[k] = (statistics.median(flat[k]), statistics.median(ratios))
            runs = " ".join(f"{x:.2f}" for x in ratios)
            print(f"{k:10} decode at depth 0 {deep[k][0]:.1f} t/s; at depth {args.d} / at 0: {deep[k][1]:.2f} (runs: {runs})")
    if args.json:
        out = {"model": Path(model).name, "threads": args.t, "p": args.p, "n": args.n, "d": args.d,
               "reps": args.r, "basalt_pp": b[0], "basalt_tg": b[1], "llamacpp_pp": l[0],
               "llamacpp_tg": l[1], "pp_ratio": ratio[0], "tg_ratio": ratio[1],
               "decode_bytes": basalt.decode_bytes}
        if deep:
            out.update({"basalt_tg_d0": deep["basalt"][0], "llamacpp_tg_d0": deep["llama.cpp"][0],
                        "basalt_depth_ratio": deep["basalt"][1], "llamacpp_depth_ratio": deep["llama.cpp"][1]})
        print(json.dumps(out))


if __name__ == "__main__":
    main()
