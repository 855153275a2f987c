#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Memory soak of `basalt serve`: N clients (8) send streamed completions back
# to back for a fixed time (10 minutes), each with a prompt of its own that
# shares a system prompt with the others (so the prefix cache, preemption and
# block reuse all run); resident memory is read from /metrics every few
# seconds. Prints the growth in MB/hour (a least-squares line over the samples
# after the first minute) and as a share of the starting RSS, and the request
# and error counts. Bounded in time; loopback only.
#
#   .venv/bin/python scripts/soak_test.py [-m MODEL.gguf] [--minutes 10] [--clients 8] [--server-args '...']
import argparse
import http.client
import json
import re
import shlex
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(port: int, name: str) -> float:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    body = c.getresponse().read().decode()
    c.close()
    m = re.search(rf"^{name} ([0-9.e+-]+)$", body, re.M)
    return float(m.group(1)) if m else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default="")
    ap.add_argument("--basalt", default=str(ROOT / "build/bin/basalt"))
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--sample-s", type=float, default=5)
    ap.add_argument("--server-args", default="", help="more options for basalt serve, e.g. '--http-threads 64'")
    a = ap.parse_args()

    port = free_port()
    cmd = [a.basalt, "serve", "--port", str(port), "--parallel", str(a.clients), "--log-interval", "60"]
    if a.model:
        cmd += ["-m", a.model]
    cmd += shlex.split(a.server_args)
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    ready = threading.Event()

    def read_log():
        for line in proc.stderr:
            if "ready on" in line:
                ready.set()
            if '"status"' in line and '"running"' in line:
                print("server:", line.strip(), flush=True)
        ready.set()

    threading.Thread(target=read_log, daemon=True).start()
    if not ready.wait(180) or proc.poll() is not None:
        raise SystemExit("the server did not come up")

    system = "You are a helpful assistant for a hardware shop. " + " ".join(
        f"Aisle {i} holds {['nails', 'screws', 'paint', 'rope', 'glue', 'tape'][i % 6]}." for i in range(24))
    end = time.time() + a.minutes * 60
    done, errors = [0], [0]
    lock = threading.Lock()

    def client(k: int):
        n = 0
        while time.time() < end:
            n += 1
            body = {"messages": [{"role": "system", "content": system},
                                 {"role": "user", "content": f"Client {k}, question {n}: where is aisle {n % 24}?"}],
                    "max_tokens": a.max_tokens, "temperature": 0.7, "stream": True}
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                c.request("POST", "/v1/chat/completions", body=json.dumps(body),
                          headers={"Content-Type": "application/json"})
                r = c.getresponse()
                ok = r.status == 200 and b"data: [DONE]" in r.read()
                c.close()
            except OSError:
                ok = False
            with lock:
                done[0] += ok
                errors[0] += not ok

    threads = [threading.Thread(target=client, args=(k,)) for k in range(a.clients)]
    for t in threads:
        t.start()
    t0 = time.time()
    samples = []
    while time.time() < end:
        samples.append((time.time() - t0, metric(port, "basalt_resident_memory_bytes") / 2**20))
        time.sleep(a.sample_s)
    for t in threads:
        t.join()
    samples.append((time.time() - t0, metric(port, "basalt_resident_memory_bytes") / 2**20))
    preemptions = metric(port, "basalt_preemptions_total")
    hits = metric(port, "basalt_prefix_cache_hits_total")
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)

    steady = [(t, m) for t, m in samples if t >= 60] or samples
    n = len(steady)
    mt = sum(t for t, _ in steady) / n
    mm = sum(m for _, m in steady) / n
    var = sum((t - mt) ** 2 for t, _ in steady)
    slope = sum((t - mt) * (m - mm) for t, m in steady) / var if var > 0 else 0.0  # MiB per second
    first, last = steady[0][1], steady[-1][1]
    print(f"soak: {a.minutes:g} min, {a.clients} clients, {done[0]} requests completed, {errors[0]} failed, "
          f"{preemptions:g} preemptions, {hits:g} prefix-cache hits")
    print(f"resident memory: {samples[0][1]:.1f} MiB at start, {first:.1f} after the first minute, {last:.1f} at the end; "
          f"growth {slope * 3600:.1f} MiB/hour (fit), {100 * (last - first) / first:.2f}% over the soak after minute 1")
    return 0 if errors[0] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
