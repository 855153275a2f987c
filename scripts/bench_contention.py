#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Speed with other work on the machine: decode and prefill of each model with
# 0, 1 and 2 background busy processes (`yes > /dev/null`, started and killed
# here by pid), the engines alternating in every round, medians of R rounds.
# Engines: basalt (build/bin/basalt, or each --basalt BIN given, e.g. an old
# and a new build to compare), and llama.cpp through llama-cpp-python.
#
#   scripts/bench_contention.py [-m MODEL ...] [--basalt BIN ...] [--busy 0,1,2]
#                               [-p 128] [-n 64] [-t THREADS] [-r 5] [--no-llama-cpp] [--json]
#
# Prints, per model and busy count, each engine's prefill and decode tokens/s
# and decode as a share of the same engine's idle decode. Bounded: every run is
# a fixed number of tokens and the busy processes die with the script.
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from bench_vs_llamacpp import LlamaCpp  # noqa: E402


def default_models() -> list[str]:
    smollm2 = subprocess.check_output([sys.executable, str(ROOT / "scripts/default_model.py")], text=True).strip()
    models = [smollm2]
    tiny = ROOT / "build/bench-models/tinyllama-1.1b-q4_0.gguf"
    if tiny.exists():
        models.append(str(tiny))
    return models


def basalt_run(binary: str, model: str, args) -> tuple[float, float]:
    cmd = [binary, "bench", "-m", model, "-p", str(args.p), "-n", str(args.n), "-t", str(args.t), "-r", "1", "--json"]
    out = json.loads(subprocess.check_output(cmd, text=True, timeout=600).strip().splitlines()[-1])
    return out["pp_tokens_per_s"], out["tg_tokens_per_s"]


class Busy:
    """n processes that spin on a core each until stopped."""

    def __init__(self, n: int):
        self.procs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(n)]

    def stop(self):
        for p in self.procs:
            p.send_signal(signal.SIGKILL)
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", action="append")
    ap.add_argument("--basalt", action="append", help="basalt binary (repeatable; default build/bin/basalt)")
    ap.add_argument("--busy", default="0,1,2")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-t", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("--no-llama-cpp", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.d = 0
    models = args.model or default_models()
    binaries = args.basalt or [str(ROOT / "build/bin/basalt")]
    busy_counts = [int(b) for b in args.busy.split(",")]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"# {cpu}, {os.cpu_count()} CPUs, -t {args.t}, prefill {args.p}, decode {args.n}, {args.r} rounds")

    results = []
    for model in models:
        llama = None if args.no_llama_cpp else LlamaCpp(args, model)
        engines = [(f"basalt({b})" if len(binaries) > 1 else "basalt",
                    lambda b=b: basalt_run(b, model, args)) for b in binaries]
        if llama:
            engines.append(("llama.cpp", llama.run))
        idle = {}
        for busy in busy_counts:
            runs = {name: [] for name, _ in engines}
            bg = Busy(busy)
            try:
                for r in range(args.r):
                    order = engines if r % 2 == 0 else engines[::-1]
                    for name, run in order:
                        runs[name].append(run())
            finally:
                bg.stop()
            for name, _ in engines:
                pp = statistics.median(x[0] for x in runs[name])
                tg = statistics.median(x[1] for x in runs[name])
                if busy == 0:
                    idle[name] = tg
                share = tg / idle[name] if name in idle else float("nan")
                row = {"model": Path(model).name, "busy": busy, "engine": name, "pp": pp, "tg": tg, "tg_share_of_idle": share}
                results.append(row)
                print(f"{Path(model).name:40s} busy {busy}  {name:28s} prefill {pp:8.1f} t/s  decode {tg:7.1f} t/s"
                      f"  ({share:.0%} of idle)")
        del llama
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
