#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Memory of `basalt serve` under long prompts: N clients (4) each send one
# completion with a prompt of its own of about T tokens (6000, all at once),
# then the script reads the KV pool's size (/metrics) and the server's peak
# resident memory (VmHWM). For a model with sliding-window layers the rings
# hold those layers' windows only (docs/ARCHITECTURE.md, KvCache), so peak
# RSS grows with the global layers' positions. Several binaries in one run
# (--basalt A --basalt B) compare builds on the same prompts. Loopback only;
# bounded (one round of requests, a timeout each).
#
#   .venv/bin/python scripts/serve_memory.py -m gemma-3-270m-q4_k_m.gguf --basalt build/bin/basalt \
#       [--basalt OLD/basalt] [--clients 4] [--tokens 6000] [--server-args '--np 4 -c 131072']
import argparse
import http.client
import json
import random
import re
import shlex
import socket
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("river bakery street lantern copper meadow orchard harbor violin granite quiet amber winter ledger "
         "compass thistle marble saddle willow canyon ember falcon juniper maple").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(port: int) -> str:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    body = c.getresponse().read().decode()
    c.close()
    return body


def metric(body: str, name: str) -> float:
    m = re.search(rf"^{name} ([0-9.e+-]+)$", body, re.M)
    return float(m.group(1)) if m else float("nan")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def prompt(seed: int, words: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def start_server(basalt: str, model: str, server_args: list):
    """basalt serve on a free loopback port, once /ready answers (2 minutes at most): (process, port)."""
    port = free_port()
    proc = subprocess.Popen([basalt, "serve", "-m", model, "--port", str(port), *server_args],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/ready")
            if c.getresponse().status == 200:
                break
        except OSError:
            time.sleep(0.5)
    return proc, port


def run_clients(client, n: int) -> float:
    """client(0) .. client(n - 1) on threads of their own, all at once; the seconds until the last ends."""
    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.time() - t0


def run(basalt: str, model: str, server_args: list, clients: int, words: int) -> dict:
    proc, port = start_server(basalt, model, server_args)
    try:
        idle = metrics(port)
        usage, errors = [], []

        def client(i: int) -> None:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
                c.request("POST", "/v1/completions", body=json.dumps(
                    {"prompt": prompt(i, words), "max_tokens": 16, "temperature": 0}),
                    headers={"Content-Type": "application/json"})
                r = c.getresponse()
                body = json.loads(r.read())
                if r.status != 200:
                    errors.append(body)
                else:
                    usage.append(body["usage"]["prompt_tokens"])
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(str(e))

        seconds = run_clients(client, clients)
        after = metrics(port)
        return {"binary": basalt, "seconds": round(seconds, 1), "prompt_tokens": usage, "errors": errors[:2],
                "kv_pool_mib": round(metric(after, "basalt_kv_cache_bytes") / 2**20, 1),
                "ring_blocks": metric(after, "basalt_kv_ring_blocks"),
                "rss_idle_mib": round(metric(idle, "basalt_resident_memory_bytes") / 2**20, 1),
                "rss_peak_mib": round(peak_rss_mib(proc.pid), 1)}
    finally:
        proc.terminate()
        proc.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--basalt", action="append", default=[])
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=6000, help="about this many prompt tokens per client")
    ap.add_argument("--server-args", default="--np 4 -c 131072")
    a = ap.parse_args()
    for b in a.basalt or [str(ROOT / "build/bin/basalt")]:
        print(json.dumps(run(b, a.model, shlex.split(a.server_args), a.clients, int(a.tokens / 1.1))), flush=True)


if __name__ == "__main__":
    main()
