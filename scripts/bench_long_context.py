#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Speed and memory against context length: basalt and llama.cpp on the same
# GGUF files, in one run (issue 25's long-context benchmark).
"""Speed and memory against context length, basalt and llama.cpp.

    scripts/bench_long_context.py -m MODEL [-m MODEL ...] [--depths 0,1024,4096,8192,16384,32768]
        [--kv f16,q8,q4] [-n 32] [-t 2] [--no-llama] [--out DIR]

Each point is one process per engine, the engines in turn: it fills D random
tokens of context (prefill from empty, in 512-token chunks: tokens/s), decodes
N tokens after them (tokens/s), and the process's peak resident memory comes
from its rusage. The KV bytes are basalt's cache for D + N positions (its
rings included: `basalt bench`'s kv_bytes). Depth 0 is the baseline the "vs d0" column divides by;
basalt's "paired vs d0" is the median ratio of --pairs decodes at depth 0 and at the depth in turn
in its process, which a machine whose bandwidth drifts between processes does not skew.

Writes DIR/long_context.jsonl (one line a point), DIR/long_context.md (the
table) and DIR/long_context.png (decode speed and peak RSS against context).
llama.cpp runs through llama-cpp-python in a child process (see
scripts/bench_vs_llamacpp.py for how to build it for this CPU); --no-llama
runs basalt alone. A 32k point of a 1.1B model takes minutes per engine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The llama.cpp side, run as `python -c LLAMA_CHILD model depth n_gen threads kv`.
LLAMA_CHILD = r"""
import json, random, sys, time
from llama_cpp import Llama
model, depth, n_gen, threads, kv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
types = {"f16": 1, "q8": 8, "q4": 2}  # GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0
llm = Llama(model_path=model, n_ctx=depth + n_gen + 16, n_batch=512, n_ubatch=512, n_threads=threads,
            n_threads_batch=threads, type_k=types[kv], type_v=types[kv], flash_attn=kv != "f16", verbose=False)
rng = random.Random(1)
n_vocab = llm.n_vocab()
fill = None
if depth > 0:
    t0 = time.perf_counter()
    llm.eval([rng.randrange(n_vocab) for _ in range(depth)])
    fill = depth / (time.perf_counter() - t0)
t0 = time.perf_counter()
for _ in range(n_gen):
    llm.eval([rng.randrange(n_vocab)])
print(json.dumps({"fill": fill, "tg": n_gen / (time.perf_counter() - t0)}))
"""


def run_child(cmd: list[str]) -> tuple[str, int]:
    """stdout and the child's peak resident bytes (its own rusage, not the script's): Popen and
    wait4, not communicate(), which would reap the child before its rusage is read."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = p.stdout.read()
    err = p.stderr.read()  # after stdout: the children write little to stderr
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {p.returncode}: {err.strip()[-400:]}")
    return out, usage.ru_maxrss * 1024


def basalt_point(args, model: str, depth: int, kv: str) -> dict:
    cmd = [str(ROOT / "build/bin/basalt"), "bench", "-m", model, "-p", "0", "-n", str(args.n), "-d", str(depth),
           "-t", str(args.t), "-r", "1", "--kv-type", kv, "--json"]
    if depth > 0 and args.pairs > 0:  # decode at depth against depth 0 in one process (basalt bench --vs-depth0)
        cmd += ["--vs-depth0", str(args.pairs)]
    out, rss = run_child(cmd)
    j = json.loads(out.strip().splitlines()[-1])
    return {"fill": j.get("depth_fill_tokens_per_s"), "tg": j["tg_tokens_per_s"], "rss": rss,
            "weight_bytes": j["weight_bytes"], "kv_bytes": j["kv_bytes"], "paired": j.get("depth_vs_depth0")}


def llama_point(args, model: str, depth: int, kv: str) -> dict:
    out, rss = run_child([sys.executable, "-c", LLAMA_CHILD, model, str(depth), str(args.n), str(args.t), kv])
    j = json.loads(out.strip().splitlines()[-1])
    return {"fill": j["fill"], "tg": j["tg"], "rss": rss}


def fmt(x, spec: str) -> str:
    return "" if x is None else format(x, spec)


def table(rows: list[dict]) -> str:
    lines = ["| model | engine | KV | context | prefill t/s | decode t/s | decode vs d0 | paired vs d0 | peak RSS MB | "
             "KV MB | RSS - weights - KV, MB |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    base = {(r["model"], r["engine"], r["kv"]): r["tg"] for r in rows if r["depth"] == 0}
    for r in rows:
        d0 = base.get((r["model"], r["engine"], r["kv"]))
        rest = (r["rss"] - r["weight_bytes"] - r["kv_bytes"]) / 1e6 if r.get("weight_bytes") else None
        lines.append(f"| {r['model']} | {r['engine']} | {r['kv']} | {r['depth']} | {fmt(r['fill'], '.0f')} | "
                     f"{r['tg']:.1f} | {fmt(r['tg'] / d0 if d0 else None, '.0%')} | {fmt(r.get('paired'), '.0%')} | "
                     f"{r['rss'] / 1e6:.0f} | "
                     f"{fmt(r.get('kv_bytes', 0) / 1e6 if r.get('kv_bytes') else None, '.0f')} | {fmt(rest, '.0f')} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax_tg, ax_rss) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key in sorted({(r["model"], r["engine"], r["kv"]) for r in rows}):
        pts = sorted((r for r in rows if (r["model"], r["engine"], r["kv"]) == key), key=lambda r: r["depth"])
        label = f"{key[1]} {key[2]} ({key[0]})"
        style = "-" if key[1] == "basalt" else "--"
        ax_tg.plot([max(r["depth"], 1) for r in pts], [r["tg"] for r in pts], style, marker="o", label=label)
        ax_rss.plot([max(r["depth"], 1) for r in pts], [r["rss"] / 1e9 for r in pts], style, marker="o", label=label)
    for ax, title in ((ax_tg, "decode tokens/s"), (ax_rss, "peak resident memory, GB")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context (tokens; depth 0 drawn at 1)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    ax_tg.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", action="append", required=True, help="a GGUF file (repeatable)")
    ap.add_argument("--depths", default="0,1024,4096,8192,16384,32768")
    ap.add_argument("--kv", default="f16,q8", help="KV cache types, comma-separated: f16, q8, q4 (llama.cpp: q8_0, q4_0)")
    ap.add_argument("-n", type=int, default=32, help="tokens to decode at each depth")
    ap.add_argument("-t", type=int, default=2, help="threads")
    ap.add_argument("--pairs", type=int, default=4,
                    help="basalt: after each fill, this many decodes at depth 0 and at the depth in turn, "
                         "their median ratio the 'paired vs d0' column (0: none)")
    ap.add_argument("--no-llama", action="store_true", help="basalt alone")
    ap.add_argument("--out", default=str(ROOT / "build/long_context"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    engines = [("basalt", basalt_point)] + ([] if args.no_llama else [("llama.cpp", llama_point)])
    rows = []
    with open(out / "long_context.jsonl", "w") as log:
        for model in args.model:
            for kv in args.kv.split(","):
                for depth in (int(d) for d in args.depths.split(",")):
                    for name, point in engines:
                        t0 = time.time()
                        try:
                            r = point(args, model, depth, kv)
                        except RuntimeError as e:  # a point past the machine's memory: noted, the rest go on
                            print(f"{name} {Path(model).name} {kv} d{depth}: {e}", file=sys.stderr)
                            continue
                        r.update(model=Path(model).stem, engine=name, kv=kv, depth=depth)
                        rows.append(r)
                        log.write(json.dumps(r) + "\n")
                        log.flush()
                        print(f"{name:9} {Path(model).stem} {kv} d{depth}: fill {fmt(r['fill'], '.0f')} t/s, "
                              f"decode {r['tg']:.1f} t/s, RSS {r['rss'] / 1e6:.0f} MB ({time.time() - t0:.0f} s)",
                              flush=True)
    (out / "long_context.md").write_text(table(rows))
    print(table(rows))
    try:
        plot(rows, out / "long_context.png")
    except ImportError:  # the table and the log are written: a missing plotter loses nothing else
        print(f"no plot: {sys.executable} -m pip install matplotlib", file=sys.stderr)
        print(f"wrote {out}/long_context.{{jsonl,md}}")
        return 0
    print(f"wrote {out}/long_context.{{jsonl,md,png}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
