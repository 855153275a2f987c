#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes OUTDIR/formats.gguf with one tensor per loadable GGUF type (random
# blocks) and OUTDIR/<TYPE>.f32 with gguf-py's dequantization of it: the outside
# reference the engine's conversions are checked against, bit for bit.
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

ROWS, COLS = 3, 512
TYPES = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q4_K, T.Q5_K, T.Q6_K]


def f16_field(rng, n, lo=0.001, hi=0.05, signed=False):
    v = rng.uniform(lo, hi, n) * (rng.choice([-1, 1], n) if signed else 1)
    return v.astype(np.float16).view(np.uint8).reshape(n, 2)


def random_blocks(t, rng):
    block, size = gguf.GGML_QUANT_SIZES[t]
    n = ROWS * COLS // block
    raw = rng.integers(0, 256, (n, size), dtype=np.uint8)
    # Keep the f16 scale fields finite: random bytes could be NaN or inf.
    if t in (T.Q8_0, T.Q4_0, T.Q5_0):
        raw[:, 0:2] = f16_field(rng, n, signed=True)
    elif t in (T.Q4_1, T.Q5_1):
        raw[:, 0:2] = f16_field(rng, n)
        raw[:, 2:4] = f16_field(rng, n, signed=True)
    elif t in (T.Q4_K, T.Q5_K):
        raw[:, 0:2] = f16_field(rng, n)
        raw[:, 2:4] = f16_field(rng, n)
    elif t == T.Q6_K:
        raw[:, 208:210] = f16_field(rng, n)
    return raw


def main(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(str(out / "formats.gguf"), "llama")
    for t in TYPES:
        if t == T.F32:
            data = rng.standard_normal((ROWS, COLS)).astype(np.float32)
        elif t == T.F16:
            data = rng.standard_normal((ROWS, COLS)).astype(np.float16)
        elif t == T.BF16:
            data = rng.integers(0, 1 << 16, (ROWS, COLS), dtype=np.uint16)
            data[(data & 0x7F80) == 0x7F80] &= 0xBFFF  # no inf/nan
            data = data.view(np.uint8).reshape(ROWS, COLS * 2)
        else:
            data = random_blocks(t, rng).reshape(ROWS, -1)
        w.add_tensor(f"t_{t.name}", data, raw_dtype=t)
        ref = dequantize(data, t).astype(np.float32).reshape(ROWS, COLS)
        ref.tofile(out / f"{t.name}.f32")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1])
