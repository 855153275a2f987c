#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Compares Google Benchmark binaries (an old build and a new one, or one binary
# under two environments) on a noisy machine: the binaries take turns, R rounds,
# the order reversed every other round, and each row's ratio is the median of
# its per-round ratios (a round's runs are seconds apart, so the machine's slow
# hours cancel; medians of separate runs do not, docs/PERFORMANCE.md "Noise").
#
#   scripts/bench_pair.py [-r 8] [--min-time 0.3] --filter REGEX BASE OTHER [OTHER ...]
#
# BASE and OTHER are commands: a binary, optionally after VAR=VALUE words, e.g.
#   scripts/bench_pair.py -r 10 --filter 'attention/1.1b/avx2/q8/d:16384/t:1/real' \
#       /tmp/old/basalt_attention_bench 'BASALT_ATTENTION_I16=0 build/bin/basalt_attention_bench'
# Prints per row each command's median time and, for the others, BASE's time
# over theirs (> 1: faster than BASE), median and range over the rounds, and
# the ratio of the fastest runs (noise only adds time: the steadier figure
# where other machines' work comes and goes).
# Bounded: R rounds of one filtered run per command.
import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys

ROW = re.compile(r"^(\S+)\s+([\d.]+) (ns|us|ms|s)\b")
TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def parse_command(text: str) -> tuple[dict[str, str], list[str]]:
    words = shlex.split(text)
    env = {}
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words:
        sys.exit(f"bench_pair: no binary in {text!r}")
    return env, words


def run_once(command: list[str], env: dict[str, str], flt: str, min_time: float) -> dict[str, float]:
    """Microseconds per benchmark row of one run."""
    full_env = dict(os.environ, OMP_WAIT_POLICY="passive", **env)
    args = command + [f"--benchmark_filter={flt}", f"--benchmark_min_time={min_time}"]
    done = subprocess.run(args, capture_output=True, text=True, env=full_env)
    if done.returncode != 0:
        sys.exit(f"bench_pair: {shlex.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    rows = {}
    for line in done.stdout.splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = float(m.group(2)) * TO_US[m.group(3)]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description="Google Benchmark binaries taking turns; medians of per-round ratios.")
    ap.add_argument("-r", "--rounds", type=int, default=8)
    ap.add_argument("--filter", required=True, help="--benchmark_filter for every command")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("commands", nargs="+", help="BASE first, then the others")
    a = ap.parse_args()
    if len(a.commands) < 2:
        sys.exit("bench_pair: give at least two commands")
    commands = [parse_command(c) for c in a.commands]

    times: dict[str, list[list[float]]] = {}  # row -> per command, per round
    for r in range(a.rounds):
        order = range(len(commands)) if r % 2 == 0 else reversed(range(len(commands)))
        round_rows: list[dict[str, float]] = [{} for _ in commands]
        for i in order:
            env, words = commands[i]
            round_rows[i] = run_once(words, env, a.filter, a.min_time)
        for row in round_rows[0]:
            if all(row in rr for rr in round_rows):
                times.setdefault(row, [[] for _ in commands])
                for i, rr in enumerate(round_rows):
                    times[row][i].append(rr[row])
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    if not times:
        sys.exit("bench_pair: no row ran under every command (check --filter)")

    print("commands: " + "; ".join(f"[{i}] {c}" for i, c in enumerate(a.commands)))
    for row, per_command in times.items():
        base = per_command[0]
        cells = [f"[0] {statistics.median(base):9.1f} us (min {min(base):.1f})"]
        for i, ts in enumerate(per_command[1:], start=1):
            ratios = sorted(b / t for b, t in zip(base, ts))
            cells.append(f"[{i}] {statistics.median(ts):9.1f} us x{statistics.median(ratios):.2f}"
                         f" ({ratios[0]:.2f}-{ratios[-1]:.2f}; mins x{min(base) / min(ts):.2f})")
        print(f"{row}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
