#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How candidate 4-bit roundings of the KV cache cost a real model, through
the numpy reference (tests/python/reference_forward.py): the keys (or values)
of every layer rounded as a scheme says, the others exact, over windows of 512
tokens of a text; printed: the mean KL divergence of the next-token
distribution from the unrounded model's (every position), and the perplexity
of each window's second half (as `basalt perplexity --ctx 512` scores).

The study behind the q4 cache's design (docs/PERFORMANCE.md 5.2). Schemes,
for keys unless "v:" (values) is in front:
  tok        per position, 32 dimensions a group, q4_0 (llama.cpp's: the
             largest magnitude exact), no rotation
  tok-rot    the same after a Walsh-Hadamard rotation of each head (the old
             q4 keys; still the q4 values)
  tok-asym   rotated, per position, a step and minimum per 32 dimensions
  chan       per channel: each dim over a group of 32 positions, a step and
             minimum (the q4 keys now), rounded once the group is whole
  chan64     the same over 64 positions
  chan-inc   per channel, rounded as positions arrive, each time again from
             the previous codes (what a cache without a stage would do)
  chan-stage per channel, rounded as positions arrive from the exact values
             (the cache's f16 stage)
  q8         int8 per position and head, absmax (the q8 cache)
  q8-32      int8 per position and 32 dimensions (llama.cpp's q8_0)
  q8-rot     int8 per position and head after the head's rotation

Needs the gguf package and llama-cpp-python (for the tokenizer only):
  PYTHONPATH=/path/to/llama_cpp_python .venv/bin/python scripts/kv_rounding_study.py \\
      -m SmolLM2-135M-Instruct.Q4_1.gguf --schemes tok-rot,chan,v:tok-rot --windows 4
About 30 s a scheme and 4 windows for the 135M model on 2 cores.
"""
import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "python"))
import reference_forward as rf  # noqa: E402


def hadamard(n: int) -> np.ndarray:
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def f16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(np.float64)


def q4_0(y: np.ndarray) -> np.ndarray:
    """Rows of y rounded as llama.cpp's q4_0: d = m / -8 (m the largest magnitude)."""
    m = y[np.arange(len(y)), np.argmax(np.abs(y), axis=1)]
    d = m / -8.0
    inv = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0)
    return (np.clip(np.floor(y * inv[:, None] + 8.5), 0, 15) - 8) * f16(d)[:, None]


def step_min(y: np.ndarray) -> np.ndarray:
    """Rows of y rounded to 16 levels between their least and greatest (f16 step and minimum)."""
    lo, hi = y.min(1), y.max(1)
    d, m = f16((hi - lo) / 15), f16(lo)
    inv = np.where(d > 0, 1 / np.where(d > 0, d, 1), 0)
    return np.clip(np.floor((y - m[:, None]) * inv[:, None] + 0.5), 0, 15) * d[:, None] + m[:, None]


def int8(y: np.ndarray) -> np.ndarray:
    """Rows of y rounded to int8 with their absmax scale (the q8 cache's rounding)."""
    amax = np.abs(y).max(1, keepdims=True)
    inv = np.where(amax > 0, 127 / np.where(amax > 0, amax, 1), 0)
    return np.rint(y * inv) * (amax / 127)


def per_position(x: np.ndarray, rot: np.ndarray | None, rounding) -> np.ndarray:
    y = x @ rot.T if rot is not None else x
    y = rounding(y.reshape(-1, 32)).reshape(x.shape)
    return y @ rot if rot is not None else y


def per_channel(x: np.ndarray, group: int) -> np.ndarray:
    """x [n_tok, n_kv, hd]: each (head, dim) over positions [g, g + group), the last group as far as it goes."""
    out = np.empty_like(x)
    for g in range(0, x.shape[0], group):
        blk = np.transpose(x[g:g + group], (1, 2, 0))          # [kv, hd, t]
        out[g:g + group] = np.transpose(step_min(blk.reshape(-1, blk.shape[-1])).reshape(blk.shape), (2, 0, 1))
    return out


def per_channel_arriving(x: np.ndarray, from_codes: bool) -> np.ndarray:
    """Per channel over 32 positions, the group rounded again as each position arrives:
    from what the codes held (from_codes) or from the exact values (a stage)."""
    out = np.empty_like(x)
    for g in range(0, x.shape[0], 32):
        held = x[g:g + 1].copy()
        for t in range(g + 1, min(g + 32, x.shape[0]) + 1):
            src = np.concatenate([held, x[t - 1:t]]) if from_codes and t > g + 1 else x[g:t]
            blk = np.transpose(src, (1, 2, 0))
            held = np.transpose(step_min(blk.reshape(-1, blk.shape[-1])).reshape(blk.shape), (2, 0, 1))
        out[g:g + held.shape[0]] = held
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-f", "--file", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--schemes", default="tok,tok-rot,tok-asym,chan,chan64,chan-inc,chan-stage,v:tok-rot")
    ap.add_argument("--windows", type=int, default=4)
    a = ap.parse_args()
    from llama_cpp import Llama
    toks = Llama(model_path=a.model, vocab_only=True, verbose=False).tokenize(open(a.file, "rb").read(), add_bos=True)
    model = rf.Model(a.model)
    rot = hadamard(model.head_dim) if model.head_dim & (model.head_dim - 1) == 0 else None
    schemes = {
        "tok": lambda x: per_position(x, None, q4_0),
        "tok-rot": lambda x: per_position(x, rot, q4_0),
        "tok-asym": lambda x: per_position(x, rot, step_min),
        "chan": lambda x: per_channel(x, 32),
        "chan64": lambda x: per_channel(x, 64),
        "chan-inc": lambda x: per_channel_arriving(x, True),
        "chan-stage": lambda x: per_channel_arriving(x, False),
        "q8": lambda x: int8(x.reshape(-1, x.shape[-1])).reshape(x.shape),
        "q8-32": lambda x: int8(x.reshape(-1, 32)).reshape(x.shape),
        "q8-rot": lambda x: int8((x @ rot.T).reshape(-1, x.shape[-1])).reshape(x.shape) @ rot,
    }
    side = {"n": 0, "k": None, "v": None}

    def round_kv(x: np.ndarray, kv_type: str, rotated: bool = False) -> np.ndarray:  # attention() rounds k, then v
        which = "k" if side["n"] % 2 == 0 else "v"
        side["n"] += 1
        return schemes[side[which]](x) if side[which] else x
    rf.round_kv = round_kv

    def logp(ids: list[int]) -> np.ndarray:
        side["n"] = 0
        lg = rf.forward_model(model, ids, kv_type="study").astype(np.float64)
        lg -= lg.max(1, keepdims=True)
        return lg - np.log(np.exp(lg).sum(1, keepdims=True))

    windows = [toks[w * 512:(w + 1) * 512] for w in range(a.windows)]
    side["k"] = side["v"] = None
    base = [logp(ids) for ids in windows]
    nll0 = np.concatenate([-b[np.arange(255, 511), np.array(ids)[256:]] for b, ids in zip(base, windows)])
    print(f"exact: perplexity {np.exp(nll0.mean()):.4f} over {len(nll0)} tokens")
    for s in a.schemes.split(","):
        side["k"], side["v"] = (None, s[2:]) if s.startswith("v:") else (s, None)
        kl, nll = [], []
        for b, ids in zip(base, windows):
            lp = logp(ids)
            kl.append((np.exp(b) * (b - lp)).sum(1))
            nll.append(-lp[np.arange(255, 511), np.array(ids)[256:]])
        kl, nll = np.concatenate(kl), np.concatenate(nll)
        print(f"{s:12s} KL {kl.mean():.5f}  perplexity {np.exp(nll.mean()):.4f} ({100 * (np.exp(nll.mean() - nll0.mean()) - 1):+.2f}%)",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
