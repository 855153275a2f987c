#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Checks basalt's HF folder path against transformers' own model code. Not run in CI.
"""basalt's logits for synthetic HF folders against transformers' modeling code.

    validate_hf_transformers.py [--cases NAME,NAME]

Needs torch and transformers, which the test suite does not install (torch's
PyPI wheel brings GBs of CUDA libraries): run it with a Python of its own,
e.g. `python3 -m venv /tmp/tvenv && /tmp/tvenv/bin/pip install torch
transformers numpy safetensors gguf`, then `/tmp/tvenv/bin/python
tests/python/validate_hf_transformers.py` from a built tree.

Each case writes a synthetic model (make_model.py) as an HF folder
(make_hf_folder.py), loads the folder with AutoModelForCausalLM in float32
(eager attention: the soft-capping is there) and compares its logits for a
sequence past the local layers' window with basalt-dump-logits' on the same
folder (f32 attention kernels, the f16 KV cache): NMSE < 1e-6 and every
argmax equal; then the same with the folder as transformers saves it again
(save_pretrained: transformers 5 writes rope_parameters, not rope_theta). check_hf.py ties the folders to the GGUF path and
check_forward.py that to numpy; this ties the reading of config.json and the
tensors' names and meanings (Gemma's norms as 1 + w, query_pre_attn_scalar,
layer_types, rope_local_base_freq, soft-caps) to transformers itself.
The multimodal Gemma 3 case is made by transformers itself: the text model in
a Gemma3ForConditionalGeneration with a tiny vision tower, saved as
transformers saves it (its names, its text_config), text-only input.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TOKENS = [1, 7, 42, 99, 3, 250, 17, 8, 300, 64, 5, 128, 77, 2, 19, 400, 33, 71, 9, 200, 11, 45, 301, 88]
_GEMMA3 = ["--arch", "gemma3", "--n-layer", "6", "--tied", "--window", "8", "--swa-period", "3", "--rope-theta", "1000000"]
# name -> (make_model.py options, make_hf_folder.py options)
CASES = {
    "llama_f32_gqa": (["--arch", "llama", "--type", "f32", "--n-head", "8", "--n-head-kv", "2", "--n-embd", "128"], []),
    "qwen2_f32_bias": (["--arch", "qwen2", "--type", "f32", "--rope-theta", "1000000"], []),
    "llama_f32_theta500k_linear2": (["--arch", "llama", "--type", "f32", "--rope-theta", "500000", "--rope-scale-linear", "2"],
                                    []),
    "mistral_f32_window8": (["--arch", "llama", "--type", "f32"], ["--sliding-window", "8"]),
    "mixtral_f32": (["--arch", "llama", "--type", "f32", "--experts", "4", "--experts-used", "2"], []),
    "qwen3_f32_head_dim_32": (["--arch", "qwen3", "--type", "f32", "--head-dim", "32", "--rope-theta", "1000000"], []),
    "qwen3moe_f32": (["--arch", "qwen3moe", "--type", "f32", "--n-ff", "32", "--experts", "8", "--experts-used", "4",
                      "--head-dim", "32"], []),
    "gemma2_f32": (["--arch", "gemma2", "--type", "f32", "--n-layer", "4", "--tied", "--window", "8",
                    "--attn-softcap", "2", "--final-softcap", "3"], []),
    "gemma3_f32": ([*_GEMMA3, "--type", "f32"], []),
    "gemma3_f32_head_dim_32": ([*_GEMMA3, "--type", "f32", "--head-dim", "32"], []),
    "gemma3_f32_layer_types": ([*_GEMMA3, "--type", "f32"], ["--layer-types"]),
    "gemma3_f32_local_base_20k": ([*_GEMMA3, "--type", "f32", "--rope-theta-swa", "20000"], []),
    "gemma3_f32_multimodal": ([*_GEMMA3, "--type", "f32"], []),  # see multimodal()
    # Phi-3: fused qkv_proj and gate_up_proj; LongRoPE past the original context (24 tokens over 16: the long
    # factors) and within it (the short ones), the attention factor from config.json; Phi-4-mini's partial
    # rotary and tied output; Phi-3-mini-4k's window (here 8) on every layer.
    "phi3_f32": (["--arch", "phi3", "--type", "f32"], []),
    "phi3_f32_longrope_long": (["--arch", "phi3", "--type", "f32", "--longrope", "16"], []),
    "phi3_f32_longrope_short": (["--arch", "phi3", "--type", "f32", "--n-ctx", "512", "--longrope", "256"], []),
    "phi4mini_f32_partial_longrope_tied": (["--arch", "phi3", "--type", "f32", "--n-embd", "128", "--rope-dim", "24",
                                            "--longrope", "16", "--tied"], []),
    "phi3_f32_window8": (["--arch", "phi3", "--type", "f32"], ["--sliding-window", "8"]),
}


def multimodal(text_model):
    """text_model inside a Gemma3ForConditionalGeneration with a tiny SigLIP tower (random, unused by text input)."""
    import torch  # noqa: F401
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration
    vision = {"model_type": "siglip_vision_model", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "image_size": 28, "patch_size": 14}
    cfg = Gemma3Config(text_config=text_model.config.to_dict(), vision_config=vision, mm_tokens_per_image=4,
                       image_token_index=500, boi_token_index=501, eoi_token_index=502)
    cfg._attn_implementation = "eager"
    mm = Gemma3ForConditionalGeneration(cfg).float().eval()
    mm.model.language_model.load_state_dict(text_model.model.state_dict(), strict=True)
    mm.tie_weights()
    return mm


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", help="comma-separated case names (default: all)")
    p.add_argument("--dump-logits", default=str(ROOT / "build" / "bin" / "basalt-dump-logits"))
    a = p.parse_args()
    import torch
    from transformers import AutoModelForCausalLM

    names = a.cases.split(",") if a.cases else list(CASES)
    failures = 0
    for name in names:
        model_opts, folder_opts = CASES[name]
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            # The project's tools run under this Python too: they need numpy and gguf only.
            subprocess.run([sys.executable, str(HERE / "make_model.py"), str(t / "m.gguf"), *model_opts], check=True)
            subprocess.run([sys.executable, str(HERE / "make_hf_folder.py"), str(t / "m.gguf"), str(t / "hf"), *folder_opts],
                           check=True)
            model = AutoModelForCausalLM.from_pretrained(str(t / "hf"), dtype=torch.float32, attn_implementation="eager")
            model.eval()
            if name.endswith("_multimodal"):
                model = multimodal(model)
            with torch.no_grad():
                ref = model(torch.tensor([TOKENS])).logits[0].float().numpy()
            # The folder as written, and as this transformers saves it again (its own config.json
            # keys: transformers 5 writes rope_parameters, layer_types, dtype).
            model.save_pretrained(str(t / "saved"))
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(t / "hf" / f, t / "saved" / f)
            for folder in ("saved",) if name.endswith("_multimodal") else ("hf", "saved"):
                subprocess.run([a.dump_logits, str(t / folder), str(t / "l.f32"), *map(str, TOKENS)], check=True,
                               capture_output=True, env={**os.environ, "BASALT_ATTENTION_BF16": "0"})
                got = np.fromfile(t / "l.f32", dtype="<f4").reshape(len(TOKENS), -1)
                label = f"{name} ({'as written' if folder == 'hf' else 'saved by transformers'})"
                if got.shape != ref.shape:
                    print(f"{label}: basalt gives {got.shape} logits, transformers {ref.shape}")
                    failures += 1
                    continue
                nmse = float(np.sum((got - ref) ** 2) / np.sum(ref ** 2))
                same = int(np.sum(got.argmax(1) == ref.argmax(1)))
                good = nmse < 1e-6 and same == len(TOKENS) and bool(np.all(np.isfinite(got)))
                failures += not good
                print(f"{label:48} NMSE {nmse:.2e}  argmax {same}/{len(TOKENS)}  {'ok' if good else 'DIFFERENT'}", flush=True)
    print("PASS" if failures == 0 else f"FAIL ({failures})")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
