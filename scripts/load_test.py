#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Load test of `basalt serve`, and of llama.cpp's llama-server under the same
# load when given one, with Locust (headless, on loopback; scripts/load/locustfile.py):
# streamed completions of a 128-token prompt (SmolLM2's tokenizer) and 128 output tokens at each
# concurrency, the servers alternating at every level. Prints a table
# (requests/s, output tokens/s, time to first token and whole-request P50/P99,
# error rate, ratios) and writes a PNG plot. Every run is bounded in time.
#
#   .venv/bin/python scripts/load_test.py [--llama-server BIN] [-m MODEL.gguf] [--levels 1,4,16,64]
#                                         [--duration 60] [--parallel 16] [--out DIR] [--basalt-args '...']
#                                         [--soak 10]  (then scripts/soak_test.py: resident memory over time)
#
# llama-server is not built by this repository; one way, from the llama.cpp
# sources inside the llama-cpp-python source package (`pip download
# --no-binary :all: llama-cpp-python`): cmake -S vendor/llama.cpp -B B
# -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF (plus the CPU flags of
# scripts/bench_vs_llamacpp.py), then `cmake --build B --target llama-server`.
# It runs with --parallel equal to basalt's and continuous batching on.
# Needs: pip install locust matplotlib.
import argparse
import csv
import importlib.util
import os
import resource
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, seconds: float = 180) -> None:
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode}) before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"{url} not ready after {seconds} s")


def start(engine: str, args, model: str, port: int) -> subprocess.Popen:
    if engine == "basalt":
        cmd = [args.basalt, "serve", "-m", model, "--port", str(port), "--parallel", str(args.parallel),
               "-c", str(args.parallel * args.slot_ctx), "--max-queue", str(args.max_queue), "-t", str(args.threads),
               *shlex.split(args.basalt_args)]
        ready = f"http://127.0.0.1:{port}/ready"
    else:
        cmd = [args.llama_server, "-m", model, "--port", str(port), "--host", "127.0.0.1", "--parallel",
               str(args.parallel), "-c", str(args.parallel * args.slot_ctx), "--cont-batching", "-t", str(args.threads),
               "--no-webui"]
        ready = f"http://127.0.0.1:{port}/health"
    log = open(Path(args.out) / f"{engine}-{port}.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    wait_ready(ready, proc)
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


RAMP_S = 5.0  # the start of a level left out of tokens/s: users arrive, first prompts are prefilled


def streamed_in_window(log: str, begin: float, end: float) -> float:
    """Output tokens streamed between begin and end (Unix seconds): each request's
    tokens spread evenly from its first token to its last. Counting only requests
    that completed in the window moves in steps of one request per user (~6% at 16
    users and 60 s), and counts a request that started before the window whole."""
    total = 0.0
    for line in open(log) if os.path.exists(log) else []:
        first, last, tokens = (float(v) for v in line.split())
        if last <= first:
            total += tokens if begin <= last <= end else 0
            continue
        total += tokens * max(0.0, min(last, end) - max(first, begin)) / (last - first)
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process pid has used so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """User + system CPU seconds of the children waited for so far (Locust, once it ends)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def locust(port: int, users: int, args, prefix: str, server_pid: int) -> dict:
    """One level: Locust's figures, and how many of the machine's cores the server and
    the load generator (which share them) each kept busy over the run."""
    log = prefix + "_requests.txt"
    env = dict(os.environ, LOAD_MAX_TOKENS=str(args.max_tokens), LOAD_LOG=log)
    Path(log).unlink(missing_ok=True)
    started = time.time()
    cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "scripts/load/locustfile.py"), "--headless",
           "-u", str(users), "-r", str(users), "--run-time", f"{args.duration}s", "--stop-timeout", "60",
           "--host", f"http://127.0.0.1:{port}", "--csv", prefix, "--only-summary"]
    server_cpu, client_cpu, t0 = cpu_seconds(server_pid), children_cpu_seconds(), time.time()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   timeout=args.duration + 180)
    elapsed = time.time() - t0
    server_cores, client_cores = (cpu_seconds(server_pid) - server_cpu) / elapsed, (children_cpu_seconds() - client_cpu) / elapsed
    rows = {r["Name"]: r for r in csv.DictReader(open(prefix + "_stats.csv"))}
    http = rows.get("/v1/completions", {})
    n_ok = int(rows["e2e"]["Request Count"]) if "e2e" in rows else 0
    n_all = int(http.get("Request Count", 0))
    n_fail = int(http.get("Failure Count", 0))
    pct = lambda name, p: float(rows[name][p]) / 1000 if name in rows and rows[name][p] not in ("N/A", "") else float("nan")
    window = (started + RAMP_S, started + args.duration)
    return {"requests_s": n_ok / args.duration, "tokens_s": streamed_in_window(log, *window) / (window[1] - window[0]),
            "ttft_p50": pct("ttft", "50%"), "ttft_p99": pct("ttft", "99%"),
            "e2e_p50": pct("e2e", "50%"), "e2e_p99": pct("e2e", "99%"),
            "error_rate": n_fail / n_all if n_all else float("nan"), "completed": n_ok, "failed": n_fail,
            "server_cores": server_cores, "client_cores": client_cores}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--basalt", default=str(ROOT / "build/bin/basalt"))
    ap.add_argument("--llama-server", default="")
    ap.add_argument("-m", "--model", default="")
    ap.add_argument("--levels", default="1,4,16,64")
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--slot-ctx", type=int, default=1024)
    ap.add_argument("--max-queue", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default="")
    ap.add_argument("--basalt-args", default="", help="more options for basalt serve, e.g. '--batch-window 50'")
    ap.add_argument("--soak", type=float, default=0, metavar="MIN",
                    help="then the memory soak of scripts/soak_test.py for MIN minutes at 8 clients (the issue's: 10)")
    args = ap.parse_args()
    if importlib.util.find_spec("locust") is None:
        sys.exit(f"load_test.py: Locust is missing: {sys.executable} -m pip install locust matplotlib")
    args.out = args.out or tempfile.mkdtemp(prefix="basalt-load-")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    model = args.model or subprocess.check_output([sys.executable, str(ROOT / "scripts/default_model.py")], text=True).strip()
    engines = ["basalt"] + (["llama-server"] if args.llama_server else [])
    levels = [int(x) for x in args.levels.split(",")]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"# {cpu}, {os.cpu_count()} CPUs, -t {args.threads}; {Path(model).name}; parallel {args.parallel}, "
          f"basalt queue {args.max_queue}; {args.duration} s per level; out {args.out}", flush=True)

    results = {}
    for i, users in enumerate(levels):
        for engine in (engines if i % 2 == 0 else engines[::-1]):
            port = free_port()
            proc = start(engine, args, model, port)
            try:
                results[(engine, users)] = locust(port, users, args, f"{args.out}/{engine}-{users}", proc.pid)
            finally:
                stop(proc)
            r = results[(engine, users)]
            print(f"{engine:12s} c={users:3d}  {r['requests_s']:6.2f} req/s  {r['tokens_s']:7.1f} tok/s  "
                  f"TTFT p50 {r['ttft_p50']:6.2f} s p99 {r['ttft_p99']:6.2f} s  e2e p50 {r['e2e_p50']:6.2f} s "
                  f"p99 {r['e2e_p99']:6.2f} s  errors {r['error_rate']:.1%} ({r['failed']} of {r['completed'] + r['failed']})  "
                  f"cores: server {r['server_cores']:.2f} Locust {r['client_cores']:.2f}",
                  flush=True)

    print("\n| engine | concurrency | requests/s | output tokens/s | TTFT P50 / P99 (s) | request P50 / P99 (s) | errors "
          "| cores busy: server / Locust |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (engine, users), r in results.items():
        print(f"| {engine} | {users} | {r['requests_s']:.2f} | {r['tokens_s']:.1f} | {r['ttft_p50']:.2f} / {r['ttft_p99']:.2f} "
              f"| {r['e2e_p50']:.2f} / {r['e2e_p99']:.2f} | {r['error_rate']:.1%} | {r['server_cores']:.2f} / {r['client_cores']:.2f} |")
    if args.llama_server:
        print("\n| concurrency | output tokens/s basalt / llama-server | request P99 basalt / llama-server |")
        print("| --- | --- | --- |")
        for users in levels:
            b, l = results[("basalt", users)], results[("llama-server", users)]
            print(f"| {users} | {b['tokens_s'] / l['tokens_s']:.2f}x | {b['e2e_p99'] / l['e2e_p99']:.2f}x |")
    single = results[("basalt", levels[0])]["tokens_s"] if levels[0] == 1 else None
    if single:
        for users in levels[1:]:
            print(f"basalt output tokens/s at {users}: {results[('basalt', users)]['tokens_s'] / single:.2f}x the single stream")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        for engine in engines:
            a1.plot(levels, [results[(engine, u)]["tokens_s"] for u in levels], marker="o", label=engine)
            a2.plot(levels, [results[(engine, u)]["e2e_p99"] for u in levels], marker="o", label=engine)
        a1.set(xlabel="concurrent clients", ylabel="output tokens/s", xscale="log", title="throughput")
        a2.set(xlabel="concurrent clients", ylabel="request P99 (s)", xscale="log", title="P99 latency")
        a1.legend(), a2.legend()
        fig.tight_layout()
        fig.savefig(Path(args.out) / "load_test.png", dpi=100)
        print(f"plot: {Path(args.out) / 'load_test.png'}")
    except ImportError:
        print("no plot: pip install matplotlib")
    if args.soak > 0:
        print(f"\n# memory soak: {args.soak:g} min, 8 clients", flush=True)
        return subprocess.call([sys.executable, str(ROOT / "scripts/soak_test.py"), "--basalt", args.basalt, "-m", model,
                                "--minutes", str(args.soak), "--clients", "8"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
