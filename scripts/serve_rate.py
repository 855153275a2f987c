#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Streamed tokens a second of `basalt serve` under N clients, for builds side
# by side: each client sends streamed completions (a prompt of ~128 tokens of
# its own, max_tokens 128, the server's default sampling) back to back for T
# seconds; every binary runs in turn, R rounds, alternating. Prints one JSON
# line per run: completed requests, streamed chunks (a token each), seconds
# until the last request ended, chunks a second. Loopback only; bounded in time
# (a request started before T ends, each has a timeout).
#
#   .venv/bin/python scripts/serve_rate.py -m MODEL.gguf --basalt OLD/basalt --basalt build/bin/basalt \
#       [--clients 16] [--seconds 20] [--rounds 2] [--server-args '...']
import argparse
import http.client
import json
import shlex
import time

from serve_memory import ROOT, prompt, run_clients, start_server


def drive(port: int, clients: int, seconds: float) -> dict:
    done, chunks, errors = [0] * clients, [0] * clients, []
    end = time.time() + seconds

    def client(i: int) -> None:
        n = 0
        while time.time() < end:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                c.request("POST", "/v1/completions", body=json.dumps(
                    {"prompt": prompt(1000 * i + n, 110), "max_tokens": 128, "stream": True}),
                    headers={"Content-Type": "application/json"})
                r = c.getresponse()
                if r.status != 200:
                    errors.append(r.status)
                for line in r:
                    if line.startswith(b"data: {"):
                        chunks[i] += 1
                done[i] += 1
                c.close()
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(str(e))
            n += 1

    took = run_clients(client, clients)
    return {"requests": sum(done), "chunks": sum(chunks), "seconds": round(took, 1),
            "chunks_per_s": round(sum(chunks) / took, 1), "errors": errors[:3]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--basalt", action="append", default=[])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--server-args", default="")
    a = ap.parse_args()
    for _ in range(a.rounds):
        for b in a.basalt or [str(ROOT / "build/bin/basalt")]:
            proc, port = start_server(b, a.model, shlex.split(a.server_args))
            try:
                print(json.dumps({"binary": b, **drive(port, a.clients, a.seconds)}), flush=True)
            finally:
                proc.terminate()
                proc.wait(60)


if __name__ == "__main__":
    main()
