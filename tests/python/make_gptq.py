#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turn a dense HF model folder into a GPTQ checkpoint, as GPTQ tools write them.

    make_gptq.py HF_DIR OUT_DIR [--bits 4|8] [--group-size N|-1] [--act-order]
                 [--asym] [--format gptq|gptq_v2] [--label gptq|gptq_v2]
                 [--config-in config|quantize_config|quant_config] [--lm-head] [--shared-order] [--seed S]

Every linear layer of the decoder (q/k/v/o, gate/up/down or each Mixtral
expert's w1/w2/w3; lm_head with --lm-head) is quantized with round-to-nearest per group (GPTQ's quantizer:
min/max grid, zero point rounded; sym puts the zero at 2^(bits-1)) and packed
like AutoGPTQ and GPTQModel do: qweight I32 [in * bits / 32][out], qzeros I32
[groups][out * bits / 32], scales F16 [groups][out], g_idx I32 [in]. With
--act-order the inputs are quantized in a random order and g_idx says which
group each input row belongs to. --format gptq stores zero - 1 (the v1 format),
gptq_v2 the zero; --label writes another format name into the config than
the one the zeros follow (the mislabeled files loaders have to detect).
The weights are GPTQ's file format, not its error-feedback algorithm: this
is test data for the loader.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import struct
from pathlib import Path

import numpy as np

from make_hf_folder import write_safetensors

LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
DTYPES = {"F32": "<f4", "F16": "<f2", "I32": "<i4"}


def read_safetensors(path: Path) -> dict[str, tuple[np.ndarray, str]]:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = raw[8 + n + a:8 + n + b]
        if info["dtype"] == "BF16":
            x = (np.frombuffer(buf, "<u2").astype("<u4") << 16).view("<f4")
        else:
            x = np.frombuffer(buf, DTYPES[info["dtype"]])
        x = x.reshape(info["shape"])
        out[name] = (x if info["dtype"] == "I32" else x.astype(np.float32), info["dtype"])
    return out


def pack(values: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """Pack unsigned `bits`-wide values into int32 along `axis`, value j of a word at bits * j."""
    v = np.moveaxis(values.astype(np.uint32), axis, 0)
    per = 32 // bits
    v = v.reshape(v.shape[0] // per, per, *v.shape[1:])
    words = np.zeros(v.shape[:1] + v.shape[2:], np.uint32)
    for j in range(per):
        words |= v[:, j] << np.uint32(bits * j)
    return np.moveaxis(words.view(np.int32), 0, axis)


def quantize(w: np.ndarray, bits: int, group_size: int, act_order: bool, sym: bool, v2: bool,
             rng: np.random.Generator, order: np.ndarray | None = None) -> dict[str, np.ndarray]:
    n_out, n_in = w.shape
    gs = n_in if group_size == -1 else group_size
    n_groups = -(-n_in // gs)
    maxq = (1 << bits) - 1
    if order is None:
        order = rng.permutation(n_in) if act_order else np.arange(n_in)
    g_idx = np.empty(n_in, np.int32)
    g_idx[order] = np.arange(n_in) // gs  # the k-th input quantized goes to group k // gs
    scales = np.zeros((n_groups, n_out), np.float16)
    zeros = np.zeros((n_groups, n_out), np.int64)
    q = np.zeros((n_in, n_out), np.int64)
    for g in range(n_groups):
        cols = np.nonzero(g_idx == g)[0]
        wg = w[:, cols]
        lo, hi = np.minimum(wg.min(1), 0), np.maximum(wg.max(1), 0)
        if sym:
            hi = np.maximum(-lo, hi)
            lo = -hi
        scale = np.where(hi > lo, (hi - lo) / maxq, 1.0).astype(np.float16)
        s32 = scale.astype(np.float32)
        zero = np.full(n_out, (maxq + 1) // 2) if sym else np.clip(np.round(-lo / s32), 0, maxq).astype(np.int64)
        q[cols] = np.clip(np.round(wg / s32[:, None]) + zero[:, None], 0, maxq).T
        scales[g], zeros[g] = scale, zero
    stored = zeros if v2 else (zeros - 1) & maxq  # the v1 format keeps zero - 1, wrapped like AutoGPTQ's packing
    return {"qweight": pack(q, bits, 0), "qzeros": pack(stored, bits, 1), "scales": scales, "g_idx": g_idx}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("hf")
    p.add_argument("out")
    p.add_argument("--bits", type=int, choices=[4, 8], default=4)
    p.add_argument("--group-size", type=int, default=128)
    p.add_argument("--act-order", action="store_true")
    p.add_argument("--shared-order", action="store_true",
                   help="with --act-order: the layers that read one input (Q, K, V; gate, up) share its order, as GPTQ's do")
    p.add_argument("--asym", action="store_true")
    p.add_argument("--format", choices=["gptq", "gptq_v2"], default="gptq")
    p.add_argument("--label", choices=["gptq", "gptq_v2"], help="checkpoint_format written (default: --format)")
    p.add_argument("--config-in", choices=["config", "quantize_config", "quant_config"], default="config")
    p.add_argument("--lm-head", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    src, out = Path(a.hf), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.suffix == ".json" and f.name != "config.json":
            shutil.copy(f, out / f.name)
    rng = np.random.default_rng(a.seed)
    tensors = read_safetensors(src / "model.safetensors")
    config = json.loads((src / "config.json").read_text())
    text = config.get("text_config", config)  # a multimodal Gemma 3: its text model's layers are quantized
    n_expert = text.get("num_local_experts", text.get("num_experts", 0))
    experts, expert_linears = (("mlp.experts.{e}.{w}", ("gate_proj", "down_proj", "up_proj"))
                               if text.get("model_type") == "qwen3_moe" else
                               ("block_sparse_moe.experts.{e}.{w}", ("w1", "w2", "w3")))
    linears = LINEARS[:4] + tuple(experts.format(e=e, w=w) for e in range(n_expert) for w in expert_linears) \
        if n_expert else LINEARS  # MoE: each expert's FFN (the router stays dense, as GPTQ tools leave it)
    if text.get("model_type") == "phi3":  # Q, K, V as one layer; gate and up as one
        linears = ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj")
    root = next(r for r in ("model.", "language_model.model.", "model.language_model.") if r + "embed_tokens.weight" in tensors)
    prefixes = [f"{root}layers.{i}.{n}" for i in range(text["num_hidden_layers"]) for n in linears]
    if a.lm_head and "lm_head.weight" in tensors:
        prefixes.append("lm_head")
    written = []
    orders = {}  # --shared-order: one act-order order per input, as GPTQ's (from the same Hessian)
    for name, (x, dtype) in tensors.items():
        prefix = name.removesuffix(".weight")
        if prefix not in prefixes:
            written.append((name, x, dtype))
            continue
        order = None
        if a.act_order and a.shared_order:
            reads = re.sub(r"\.(self_attn\.[qkv]_proj|(gate|up)_proj|w[13])$",
                           lambda m: ".attention input" if m[1].startswith("self_attn") else ".ffn input", prefix)
            order = orders.setdefault(reads, rng.permutation(x.shape[1]))
        for part, v in quantize(x, a.bits, a.group_size, a.act_order, not a.asym, a.format == "gptq_v2", rng, order).items():
            written.append((f"{prefix}.{part}", v, "F16" if part == "scales" else "I32"))
    write_safetensors(out / "model.safetensors", written)
    qc = {"bits": a.bits, "group_size": a.group_size, "desc_act": a.act_order, "sym": not a.asym,
          "static_groups": False, "true_sequential": True, "damp_percent": 0.01, "lm_head": a.lm_head,
          "checkpoint_format": a.label or a.format, "meta": {"quantizer": ["basalt make_gptq.py (RTN)"]}}
    if a.config_in == "config":
        config["quantization_config"] = {"quant_method": "gptq", **qc}
    else:
        (out / f"{a.config_in}.json").write_text(json.dumps(qc, indent=2))
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
