#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""HF model folders: basalt must run one exactly like the GGUF it was made from.

    check_hf.py --dump-logits BIN --case NAME     (one of --list)
    check_hf.py --list

Each case writes a synthetic model with make_model.py (dense weights), turns
it into an HF folder with make_hf_folder.py (PyTorch names, rotate-half Q/K,
separate expert tensors, optionally sharded) and compares the logits of the
two through basalt-dump-logits. The GGUF path itself is checked against an
independent numpy forward pass (check_forward.py), so this ties the HF loader
to that reference. The only difference allowed is float rounding: the HF
folder's RoPE pairs dimensions in another order (same math, other summation
order): |hf - gguf| <= 1e-4 * max|gguf| and the same argmax everywhere.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_model  # noqa: E402
from case_args import parse_case_args  # noqa: E402

# name -> (make_model.py options, shards)
CASES = {
    "llama_f32": (["--arch", "llama", "--type", "f32"], 1),
    "llama_bf16_tied": (["--arch", "llama", "--type", "bf16", "--tied"], 1),
    "llama_f16_gqa4_sharded": (["--arch", "llama", "--type", "f16", "--n-head", "8", "--n-head-kv", "2"], 3),
    "qwen2_f16_bias": (["--arch", "qwen2", "--type", "f16"], 1),
    "moe_f32_sharded": (["--arch", "llama", "--type", "f32", "--experts", "4", "--experts-used", "2"], 2),
}
TOKENS = [1, 7, 42, 99, 3, 250, 17, 8, 300, 64, 5, 128, 77, 2, 19, 400, 33, 71, 9, 200]


def logits(dump: str, model: Path, out: Path, n_vocab: int) -> np.ndarray:
    subprocess.run([dump, str(model), str(out), *map(str, TOKENS)], check=True)
    return np.fromfile(out, dtype="<f4").reshape(len(TOKENS), n_vocab)


def main() -> int:
    a = parse_case_args(__doc__, CASES)
    if a is None:
        return 0
    options, shards = CASES[a.case]
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        cfg = make_model.parse_config(options)
        make_model.check_config(cfg)
        make_model.write_model(t / "m.gguf", cfg)
        subprocess.run([sys.executable, str(HERE / "make_hf_folder.py"), str(t / "m.gguf"), str(t / "hf"),
                        "--shards", str(shards)], check=True)
        n_vocab = int(__import__("json").loads((t / "hf" / "config.json").read_text())["vocab_size"])
        ref = logits(a.dump_logits, t / "m.gguf", t / "gguf.f32", n_vocab)
        got = logits(a.dump_logits, t / "hf", t / "hf.f32", n_vocab)
    worst = float(np.max(np.abs(got - ref)))
    scale = float(np.max(np.abs(ref)))
    same_argmax = int(np.sum(got.argmax(1) == ref.argmax(1)))
    print(f"{a.case}: max |hf - gguf| {worst:.3e} (bound {1e-4 * scale:.3e}), argmax equal at {same_argmax}/{len(TOKENS)}")
    ok = worst <= 1e-4 * scale and same_argmax == len(TOKENS) and np.all(np.isfinite(got))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
