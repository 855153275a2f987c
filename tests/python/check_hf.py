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

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_model  # noqa: E402
from case_args import parse_case_args  # noqa: E402

# Gemma 3 with a window shorter than the tokens, a global layer every 3rd (2, 5) and a RoPE base of its own.
_GEMMA3 = ["--arch", "gemma3", "--n-layer", "6", "--tied", "--window", "8", "--swa-period", "3", "--rope-theta", "1000000"]
# name -> (make_model.py options, make_hf_folder.py options)
CASES = {
    "llama_f32": (["--arch", "llama", "--type", "f32"], []),
    "llama_bf16_tied": (["--arch", "llama", "--type", "bf16", "--tied"], []),
    "llama_f16_gqa4_sharded": (["--arch", "llama", "--type", "f16", "--n-head", "8", "--n-head-kv", "2"], ["--shards", "3"]),
    "qwen2_f16_bias": (["--arch", "qwen2", "--type", "f16"], []),
    "moe_f32_sharded": (["--arch", "llama", "--type", "f32", "--experts", "4", "--experts-used", "2"], ["--shards", "2"]),
    # Qwen3: per-head Q/K norms, head_dim not n_embd / n_head; Qwen3-MoE's config keys and expert names
    "qwen3_bf16_head_dim_32": (["--arch", "qwen3", "--type", "bf16", "--head-dim", "32", "--tied"], []),
    "qwen3moe_f32_sharded": (["--arch", "qwen3moe", "--type", "f32", "--n-ff", "32", "--experts", "8", "--experts-used", "4"],
                             ["--shards", "2"]),
    # Phi-3: fused qkv_proj and gate_up_proj; Phi-3.5's LongRoPE past its original context (16 of 256);
    # Phi-4-mini's partial rotary (24 of 32 dims) and tied output
    "phi3_f32": (["--arch", "phi3", "--type", "f32"], []),
    "phi3_bf16_longrope_partial_tied": (["--arch", "phi3", "--type", "bf16", "--n-embd", "128", "--rope-dim", "24",
                                         "--longrope", "16", "--tied"], ["--shards", "2"]),
    # Gemma 2: every other layer local (window 8), small soft-caps so that they bend the values.
    "gemma2_f32": (["--arch", "gemma2", "--type", "f32", "--n-layer", "4", "--tied", "--window", "8",
                    "--attn-softcap", "2", "--final-softcap", "3"], []),
    "gemma3_f32": ([*_GEMMA3, "--type", "f32"], []),
    # head_dim not n_embd / n_head (the real ones: 256 on 640 with 4 heads)
    "gemma3_f32_head_dim_32": ([*_GEMMA3, "--type", "f32", "--head-dim", "32"], []),
    "gemma3_bf16_layer_types_sharded": ([*_GEMMA3, "--type", "bf16"], ["--layer-types", "--shards", "2"]),
    # RoPE as transformers 5 writes config.json (rope_parameters; Gemma 3's per layer type, its local base its own)
    "llama_f32_rope_parameters": (["--arch", "llama", "--type", "f32", "--rope-theta", "500000", "--rope-scale-linear", "2"],
                                  ["--rope-parameters"]),
    "gemma3_f32_rope_parameters": ([*_GEMMA3, "--type", "f32", "--rope-theta-swa", "20000"], ["--rope-parameters"]),
    # Gemma3ForConditionalGeneration: the text model's keys and tensors where transformers puts them.
    "gemma3_f32_multimodal_old": ([*_GEMMA3, "--type", "f32"], ["--multimodal", "old"]),
    "gemma3_f16_multimodal_new": ([*_GEMMA3, "--type", "f16"], ["--multimodal", "new", "--shards", "2"]),
}
TOKENS = [1, 7, 42, 99, 3, 250, 17, 8, 300, 64, 5, 128, 77, 2, 19, 400, 33, 71, 9, 200]


def logits(dump: str, model: Path, out: Path, n_vocab: int) -> np.ndarray:
    subprocess.run([dump, str(model), str(out), *map(str, TOKENS)], check=True)
    return np.fromfile(out, dtype="<f4").reshape(len(TOKENS), n_vocab)


def main() -> int:
    a = parse_case_args(__doc__, CASES)
    if a is None:
        return 0
    options, folder_options = CASES[a.case]
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        cfg = make_model.parse_config(options)
        make_model.check_config(cfg)
        make_model.write_model(t / "m.gguf", cfg)
        subprocess.run([sys.executable, str(HERE / "make_hf_folder.py"), str(t / "m.gguf"), str(t / "hf"), *folder_options],
                       check=True)
        config = json.loads((t / "hf" / "config.json").read_text())
        n_vocab = int(config.get("text_config", config)["vocab_size"])
        ref = logits(a.dump_logits, t / "m.gguf", t / "gguf.f32", n_vocab)
        got = logits(a.dump_logits, t / "hf", t / "hf.f32", n_vocab)
        info = subprocess.run([str(Path(a.dump_logits).parent / "basalt"), "info", str(t / "hf")], capture_output=True,
                              text=True, check=True).stdout
    # A multimodal checkpoint says that only its text model runs.
    says_text_only = "its text model only" in info
    if says_text_only != ("--multimodal" in folder_options):
        print(f"basalt info's source line: {info.splitlines()[0]!r}")
        return 1
    worst = float(np.max(np.abs(got - ref)))
    scale = float(np.max(np.abs(ref)))
    same_argmax = int(np.sum(got.argmax(1) == ref.argmax(1)))
    print(f"{a.case}: max |hf - gguf| {worst:.3e} (bound {1e-4 * scale:.3e}), argmax equal at {same_argmax}/{len(TOKENS)}")
    ok = worst <= 1e-4 * scale and same_argmax == len(TOKENS) and np.all(np.isfinite(got))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
