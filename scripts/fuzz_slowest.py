#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Time every input of a fuzz corpus once: the slowest input, and the most
time per byte among inputs of 1 KB or more (a super-linear path shows as a
large figure there). Prints one line: "SLOWEST_MS SIZE MS_PER_KB".

    fuzz_slowest.py FUZZ_BINARY CORPUS_DIR

libFuzzer given files instead of a folder runs each once and prints
"Executed FILE in N ms" (milliseconds: short inputs read 0 or 1). An empty
input runs first in every batch, so a target's one-time setup (a vocabulary
it loads on first use) is not counted against a real input.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

EXECUTED = re.compile(r"^Executed (.+) in (\d+) ms$", re.M)


def main() -> int:
    binary, corpus = sys.argv[1], Path(sys.argv[2])
    files = sorted(str(p) for p in corpus.iterdir() if p.is_file())
    slowest, slowest_size, per_kb = 0, 0, 0.0
    warmup = tempfile.NamedTemporaryFile(prefix="fuzz-warmup-")
    for i in range(0, len(files), 500):
        run = subprocess.run([binary, "-timeout=10", "-rss_limit_mb=4096", warmup.name, *files[i:i + 500]],
                             capture_output=True, text=True, errors="replace", env=os.environ)
        for path, ms in EXECUTED.findall(run.stdout + run.stderr):
            if path == warmup.name:
                continue
            ms, size = int(ms), os.path.getsize(path)
            if ms > slowest:
                slowest, slowest_size = ms, size
            if size >= 1024:
                per_kb = max(per_kb, ms * 1024 / size)
    print(slowest, slowest_size, f"{per_kb:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
