#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GPTQ checkpoints: basalt must hold exactly the weights the files define.

    check_gptq.py --dump-logits BIN --case NAME     (one of --list)
    check_gptq.py --list

Each case makes a synthetic model (make_model.py), its HF folder
(make_hf_folder.py) and a GPTQ checkpoint of it (make_gptq.py: bits, group
size, act-order, sym/asym, the gptq and gptq_v2 zero-point formats, a
mislabeled file, the three places the config can live, Mixtral experts). Then:
1. every quantized layer as basalt holds it (basalt-dump-logits --weight)
   equals, bit for bit, this file's own numpy dequantization of qweight,
   qzeros, scales and g_idx: w[o][i] = scales[g][o] * (q[i][o] - zero[g][o]),
   g = g_idx[i], zero = stored + 1 in the gptq format;
2. the model's logits are those of the same model with these dequantized
   weights stored dense (F32): the GPTQ path runs int8 activations x int4/int8
   weights, the dense one f32, so within 3% RMS, and ties the layers' wiring
   (act-order permutation, biases, lm_head) to the dense reference.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_model  # noqa: E402
from case_args import parse_case_args  # noqa: E402
from make_gptq import read_safetensors  # noqa: E402
from make_hf_folder import write_safetensors  # noqa: E402

MODEL = ["--n-embd", "256", "--n-ff", "384", "--n-head", "4", "--n-head-kv", "2", "--n-layer", "2"]
_GEMMA3 = ["--arch", "gemma3", "--type", "f32", "--tied", "--window", "8", "--swa-period", "2", "--rope-theta", "1000000"]
# name -> (make_model.py options, make_gptq.py options)
CASES = {
    "q4_g128_sym": (["--arch", "llama", "--type", "f32"], ["--bits", "4", "--group-size", "128"]),
    "q4_g32_asym_quantize_config": (["--arch", "llama", "--type", "f16"],
                                    ["--bits", "4", "--group-size", "32", "--asym", "--config-in", "quantize_config"]),
    "q4_g64_act_order_sym_quant_config": (["--arch", "llama", "--type", "f32"],
                                          ["--bits", "4", "--group-size", "64", "--act-order", "--config-in", "quant_config"]),
    "q4_g128_act_order_asym_v2": (["--arch", "llama", "--type", "f32"],
                                  ["--bits", "4", "--group-size", "128", "--act-order", "--asym", "--format", "gptq_v2"]),
    # as GPTQ tools write act-order: Q, K, V in one order, gate and up in one (the engine reorders their input once)
    "q4_g64_act_order_shared_sym": (["--arch", "llama", "--type", "f32"],
                                    ["--bits", "4", "--group-size", "64", "--act-order", "--shared-order"]),
    "mixtral_q4_g64_act_order_shared_asym": (["--arch", "llama", "--type", "f32", "--experts", "4", "--experts-used", "2"],
                                             ["--bits", "4", "--group-size", "64", "--act-order", "--shared-order", "--asym"]),
    "q4_per_row_sym_v2_lm_head": (["--arch", "llama", "--type", "f32"],
                                  ["--bits", "4", "--group-size", "-1", "--format", "gptq_v2", "--lm-head"]),
    "q4_sym_v2_labelled_gptq": (["--arch", "llama", "--type", "f32"],
                                ["--bits", "4", "--group-size", "64", "--format", "gptq_v2", "--label", "gptq"]),
    "q8_g128_sym": (["--arch", "llama", "--type", "f32"], ["--bits", "8", "--group-size", "128"]),
    "q8_g32_act_order_asym_v2": (["--arch", "llama", "--type", "f32"],
                                 ["--bits", "8", "--group-size", "32", "--act-order", "--asym", "--format", "gptq_v2"]),
    "qwen3moe_q4_g32_act_order_shared_sym": (["--arch", "qwen3moe", "--type", "f32", "--n-ff", "64", "--experts", "8",
                                              "--experts-used", "4", "--head-dim", "32"],
                                             ["--bits", "4", "--group-size", "32", "--act-order", "--shared-order"]),
    # Phi-3: qkv_proj and gate_up_proj quantized as one layer each (their outputs split at load)
    "phi3_q4_g32_act_order_sym": (["--arch", "phi3", "--type", "f32", "--longrope", "16"],
                                  ["--bits", "4", "--group-size", "32", "--act-order"]),
    "phi3_q8_g64_asym": (["--arch", "phi3", "--type", "f32"], ["--bits", "8", "--group-size", "64", "--asym"]),
    "qwen2_q4_g64_asym_bias": (["--arch", "qwen2", "--type", "f32"], ["--bits", "4", "--group-size", "64", "--asym"]),
    "mixtral_q4_g64_asym_experts": (["--arch", "llama", "--type", "f32", "--experts", "4", "--experts-used", "2"],
                                    ["--bits", "4", "--group-size", "64", "--asym"]),
    "mixtral_q4_g32_act_order_sym_experts": (["--arch", "llama", "--type", "f32", "--experts", "4", "--experts-used", "2"],
                                             ["--bits", "4", "--group-size", "32", "--act-order"]),
    "mixtral_q8_g128_sym_experts": (["--arch", "llama", "--type", "f16", "--experts", "4", "--experts-used", "2"],
                                    ["--bits", "8", "--group-size", "128"]),
    # Gemma 3 (a global layer every other one, window 8), text-only and as the multimodal class
    "gemma3_q4_g64_asym": (_GEMMA3, ["--bits", "4", "--group-size", "64", "--asym"]),
    "gemma3_multimodal_q4_g32_act_order_sym": (_GEMMA3, ["--bits", "4", "--group-size", "32", "--act-order"]),
    "gemma2_q4_g64_asym_soft_caps": (["--arch", "gemma2", "--type", "f32", "--tied", "--window", "8", "--attn-softcap", "5",
                                      "--final-softcap", "8"], ["--bits", "4", "--group-size", "64", "--asym"]),
}
# make_hf_folder.py options where a case needs some
FOLDER_OPTIONS = {"gemma3_multimodal_q4_g32_act_order_sym": ["--multimodal", "new"]}
TOKENS = [1, 7, 42, 99, 3, 250, 17, 8, 300, 64, 5, 128, 77, 2, 19, 400]


def unpack(words: np.ndarray, bits: int, axis: int) -> np.ndarray:
    w = np.moveaxis(words.astype(np.int64) & 0xFFFFFFFF, axis, -1)
    per = 32 // bits
    v = np.stack([(w >> (bits * j)) & ((1 << bits) - 1) for j in range(per)], axis=-1)
    return np.moveaxis(v.reshape(*w.shape[:-1], w.shape[-1] * per), -1, axis)


def dequantize(t: dict, prefix: str, bits: int, v2: bool) -> np.ndarray:
    """The reference: [out][in] float32 from the packed GPTQ tensors."""
    q = unpack(t[prefix + ".qweight"][0].astype(np.int64), bits, 0)    # [in][out]
    z = unpack(t[prefix + ".qzeros"][0].astype(np.int64), bits, 1)     # [groups][out]
    z = z if v2 else z + 1
    s = t[prefix + ".scales"][0].astype(np.float16).astype(np.float32)  # [groups][out]
    g = t[prefix + ".g_idx"][0].astype(np.int64)
    return (s[g] * (q - z[g]).astype(np.float32)).T.astype(np.float32)


def run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True)


def main() -> int:
    a = parse_case_args(__doc__, CASES)
    if a is None:
        return 0
    model_opts, gptq_opts = CASES[a.case]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        cfg = make_model.parse_config(MODEL + model_opts)
        make_model.check_config(cfg)
        make_model.write_model(t / "m.gguf", cfg)
        run([sys.executable, str(HERE / "make_hf_folder.py"), str(t / "m.gguf"), str(t / "hf"), *FOLDER_OPTIONS.get(a.case, [])])
        run([sys.executable, str(HERE / "make_gptq.py"), str(t / "hf"), str(t / "gptq"), *gptq_opts])
        bits = int(gptq_opts[gptq_opts.index("--bits") + 1])
        v2 = "gptq_v2" in gptq_opts and gptq_opts[gptq_opts.index("--format") + 1] == "gptq_v2"
        tensors = read_safetensors(t / "gptq" / "model.safetensors")
        prefixes = sorted(n.removesuffix(".qweight") for n in tensors if n.endswith(".qweight"))

        # 1. Each layer, bit for bit.
        dense = {n: v for n, v in tensors.items() if not n.endswith((".qweight", ".qzeros", ".scales", ".g_idx"))}
        for prefix in prefixes:
            ref = dequantize(tensors, prefix, bits, v2)
            dense[prefix + ".weight"] = (ref, "F32")
            # Experts ...experts.E.w1 (Qwen3-MoE: .gate_proj) are rows [E * out, (E + 1) * out) of basalt's stacked ...experts.w1.
            m = re.fullmatch(r"(.*\.experts)\.(\d+)\.(w[123]|(?:gate|up|down)_proj)", prefix)
            name, expert = (f"{m[1]}.{m[3]}", int(m[2])) if m else (prefix, 0)
            run([a.dump_logits, str(t / "gptq"), str(t / "w.f32"), "--weight", name])
            got = np.fromfile(t / "w.f32", dtype="<f4").reshape(-1, ref.shape[1])[expert * ref.shape[0]:(expert + 1) * ref.shape[0]]
            same = np.array_equal(got.view(np.uint32), ref.view(np.uint32))
            if not same:
                bad = np.argwhere(got.view(np.uint32) != ref.view(np.uint32))
                o, i = bad[0]
                print(f"{prefix}: {len(bad)} weights differ, first [{o}][{i}]: basalt {got[o, i]!r}, reference {ref[o, i]!r}")
            ok = ok and same
        print(f"{a.case}: {len(prefixes)} GPTQ layers dequantized bit-exactly: {'yes' if ok else 'NO'}")

        # 2. The model against its dense twin.
        (t / "dense").mkdir()
        for f in (t / "gptq").iterdir():
            if f.suffix == ".json":
                (t / "dense" / f.name).write_bytes(f.read_bytes())
        config = json.loads((t / "dense" / "config.json").read_text())
        config.pop("quantization_config", None)
        (t / "dense" / "config.json").write_text(json.dumps(config))
        for extra in ("quantize_config.json", "quant_config.json"):
            (t / "dense" / extra).unlink(missing_ok=True)
        write_safetensors(t / "dense" / "model.safetensors", [(n, x, d) for n, (x, d) in dense.items()])
        n_vocab = int(config.get("text_config", config)["vocab_size"])
        outs = []
        for folder in ("gptq", "dense"):
            run([a.dump_logits, str(t / folder), str(t / "l.f32"), *map(str, TOKENS)])
            outs.append(np.fromfile(t / "l.f32", dtype="<f4").reshape(len(TOKENS), n_vocab))
    got, ref = outs
    rel = float(np.sqrt(np.mean((got - ref) ** 2)) / np.sqrt(np.mean(ref ** 2)))
    print(f"{a.case}: logits against the dense twin: relative RMS difference {rel:.2e} (bound 3e-2)")
    ok = ok and rel <= 3e-2 and bool(np.all(np.isfinite(got)))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
