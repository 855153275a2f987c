#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The whole-model forward cases CI runs: engine logits vs reference_forward.py.
"""Whole-model forward cases for check_forward.py.

    forward_cases.py --list          one case name per line (for CMake)
    forward_cases.py --show NAME     the make_model options of a case

A case is a synthetic model (make_model.py options) or the real default model
(model="default"), plus the tokens to run. Its error bound is a margin over
llama.cpp's own error on it (check_forward.py, validate_reference.py --write-bounds).

CMake (tests/CMakeLists.txt), one ctest per case:

    execute_process(COMMAND ${Python3_EXECUTABLE} ${py}/forward_cases.py --list
                    OUTPUT_VARIABLE cases OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(REPLACE "\\n" ";" cases "${cases}")
    foreach(c IN LISTS cases)
      add_test(NAME forward.${c} COMMAND ${Python3_EXECUTABLE} ${py}/check_forward.py
               --dump-logits $<TARGET_FILE:dump_logits> --case ${c})
    endforeach()
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    make: tuple[str, ...] = ()       # make_model.py options (without OUT)
    model: str = ""                  # "default" = the real SmolLM2 file, "gemma3" = Gemma 3 270M; no make
    tokens: tuple[int, ...] = ()     # empty: n_tokens ids drawn from a fixed seed
    n_tokens: int = 32
    gpu: str = ""                    # a GPU placement (--gpu) for the engine: "" = CPU only
    ubatch: int = 0                  # tokens per engine batch (BASALT_UBATCH): 0 = all at once
    gpu_fail_after: int = -1         # BASALT_GPU_FAIL_AFTER: the device is "lost" after this many GPU nodes
    gpu_memory_mib: int = 0          # BASALT_GPU_MEMORY_MIB: the device memory the engine may use
    kv_type: str = ""                # BASALT_KV_TYPE: the engine's KV cache (f16, q8, q4, k8v4; the reference rounds alike); "" = f16
    gpu_portable: str = ""           # BASALT_GPU_PORTABLE: device features the shaders may not use
    base: str = ""                   # the CPU case this one varies: its llama.cpp error bounds this one too
    window: int = 0                  # BASALT_WINDOW (basalt --window; the reference masks alike): 0 = off
    sinks: int = 0                   # BASALT_ATTENTION_SINKS (with window)


# Shapes that every block-32 type accepts, and the K-quant shapes (rows of 256).
SMALL = ("--n-embd", "64", "--n-ff", "128", "--n-head", "4", "--n-head-kv", "2")
KQ = ("--n-embd", "256", "--n-ff", "512", "--n-head", "4", "--n-head-kv", "2")  # head_dim 64

# "The capital of France is Paris. It is a beautiful city with many museums and"
# in the SmolLM2 vocabulary (ids looked up from tokenizer.ggml.tokens).
SMOLLM2_PROMPT = (504, 3575, 282, 4649, 314, 7042, 30, 657, 314, 253, 3953, 2240, 351,
                  800, 14739, 284)


# "<bos>The capital of France is the capital of the country of France. It is"
# in the Gemma 3 vocabulary (tests/data/greedy/gemma3.json's first case).
GEMMA3_PROMPT = (2, 818, 5279, 529, 7001, 563, 506, 5279, 529, 506, 2891, 529, 7001, 236761, 1030, 563)
# Real text past Gemma 3's window: uniformly random ids made positions whose logits any change of
# rounding moved (llama.cpp's own NMSE there 1.29e-2, its argmax off at six positions;
# docs/PERFORMANCE.md 6.16), so the case tested the input's chaos more than the rings.
GEMMA3_TEXT = tuple(json.loads((Path(__file__).resolve().parents[1] / "data" / "forward" /
                                "gemma3_gpl3_704.json").read_text())["tokens"])


def _dense(arch: str, wtype: str, *extra: str) -> tuple[str, ...]:
    shape = KQ if wtype in ("q4_k", "q5_k", "q6_k", "mix-q4_k_m") else SMALL
    return ("--arch", arch, "--type", wtype, *shape, *extra)


CASES: list[Case] = [
    # llama dense, every weight type
    *[Case(f"llama_{t.replace('-', '_')}", _dense("llama", t))
      for t in ("f32", "f16", "bf16", "q4_0", "q4_1", "q8_0", "q4_k", "q5_k", "q6_k",
                "mix-q4_k_m")],
    # qwen2: q/k/v biases, NeoX RoPE, large theta
    *[Case(f"qwen2_{t}", _dense("qwen2", t, "--rope-theta", "1000000"))
      for t in ("f32", "q8_0", "q4_0", "q4_k")],
    # GQA ratios 1, 2, 4 (n_head 8, head_dim 16; n_head_kv 8, 4, 2)
    *[Case(f"llama_gqa{8 // kv}_{t}",
           ("--arch", "llama", "--type", t, "--n-embd", "128", "--n-ff", "256",
            "--n-head", "8", "--n-head-kv", str(kv)))
      for kv in (8, 4, 2) for t in ("f32", "q8_0")],
    Case("qwen2_gqa4_q4_1", ("--arch", "qwen2", "--type", "q4_1", "--n-embd", "128",
                             "--n-ff", "256", "--n-head", "8", "--n-head-kv", "2")),
    # tied output (no output.weight: the embedding is the head)
    Case("llama_tied_f32", _dense("llama", "f32", "--tied")),
    Case("llama_tied_q8_0", _dense("llama", "q8_0", "--tied")),
    Case("llama_tied_q4_k", _dense("llama", "q4_k", "--tied")),
    Case("qwen2_tied_q4_0", _dense("qwen2", "q4_0", "--tied")),
    # MoE: 4 experts, top 2 (Mixtral style: softmax, top-k, renormalize)
    *[Case(f"llama_moe4_top2_{t}", _dense("llama", t, "--experts", "4", "--experts-used", "2"))
      for t in ("f32", "q4_0", "q8_0")],
    Case("llama_moe8_top2_q4_k", _dense("llama", "q4_k", "--experts", "8", "--experts-used", "2")),
    # RoPE linear scaling (positions / 4)
    Case("llama_rope_linear4_f32", _dense("llama", "f32", "--rope-scale-linear", "4")),
    Case("llama_rope_linear4_q8_0", _dense("llama", "q8_0", "--rope-scale-linear", "4")),
    Case("qwen2_rope_linear2_f32", _dense("qwen2", "f32", "--rope-scale-linear", "2")),
    # RoPE past the training context: YaRN (a ramp over pairs 0-3 of 8 at head_dim
    # 16, original context 64) and Llama 3.1's per-pair factors (kept, mixed, divided)
    Case("llama_rope_yarn4_f32", _dense("llama", "f32", "--rope-yarn", "4:64")),
    Case("qwen2_rope_yarn4_q8_0", _dense("qwen2", "q8_0", "--rope-yarn", "4:64", "--rope-theta", "1000000")),
    Case("llama_rope_llama3_f32", _dense("llama", "f32", "--rope-llama3", "8:1:4:64")),
    # head_dim 64 and 32, and a head_dim that is not n_embd / n_head
    Case("llama_hd64_f32", ("--arch", "llama", "--type", "f32", "--n-embd", "128",
                            "--n-ff", "256", "--n-head", "2", "--n-head-kv", "1")),
    Case("llama_hd32_q8_0", ("--arch", "llama", "--type", "q8_0", "--n-embd", "128",
                             "--n-ff", "256", "--n-head", "4", "--n-head-kv", "2")),
    Case("llama_hd32_explicit_f32", ("--arch", "llama", "--type", "f32", "--n-embd", "64",
                                     "--n-ff", "128", "--n-head", "4", "--n-head-kv", "2",
                                     "--head-dim", "32")),
    Case("qwen2_hd64_q4_k", ("--arch", "qwen2", "--type", "q4_k", "--n-embd", "256",
                             "--n-ff", "256", "--n-head", "4", "--n-head-kv", "1")),
    # deeper, longer, and the real vocabulary size
    Case("llama_q8_0_4layers_long", _dense("llama", "q8_0", "--n-layer", "4"), n_tokens=128),
    Case("llama_q4_0_smollm2_vocab", _dense("llama", "q4_0", "--vocab", "smollm2"), n_tokens=16),
    # the real model (SmolLM2-135M-Instruct Q4_1; token_embd Q8_0, tied)
    Case("smollm2_real", model="default", tokens=SMOLLM2_PROMPT),
    # Gemma 3 270M (Q4_K_M: Q5_0, Q4_K, Q6_K, Q8_0 tensors; local and global layers)
    Case("gemma3_real", model="gemma3", tokens=GEMMA3_PROMPT),
    # ... past its 512-position window, in 64-token chunks: its local layers' caches are rings
    # of 10 blocks (the window and a chunk) over 11 blocks of context, wrapped around.
    Case("gemma3_real_past_window", model="gemma3", tokens=GEMMA3_TEXT, ubatch=64),
    # Gemma 2 (synthetic): every other layer local (a 24-position window, past it), the output
    # tied, and soft-capping so small (scores 2, logits 3) that it bends most values: a
    # missing or misplaced tanh is far outside the bounds. Then head_dim 64 (the AVX-512
    # bf16 and int8 score paths) past a 40-position window in 16-token chunks (rings).
    Case("gemma2_f32", _dense("gemma2", "f32", "--n-layer", "4", "--tied", "--window", "24",
                              "--attn-softcap", "2", "--final-softcap", "3"), n_tokens=64),
    Case("gemma2_q4_k_hd64", _dense("gemma2", "q4_k", "--n-layer", "4", "--tied", "--window", "40",
                                    "--attn-softcap", "2", "--final-softcap", "3"), n_tokens=160, ubatch=16),
    # Gemma 3 (synthetic, dense): Q/K norms, layer 5 global with its own RoPE base (10^6 against
    # the local layers' 10^4), past the local layers' 24-position window. (llama.cpp, which sets
    # the bounds, reads neither the pattern nor the local base from the file: 6 and 10^4 it is.)
    Case("gemma3_f32", _dense("gemma3", "f32", "--n-layer", "6", "--tied", "--window", "24",
                              "--rope-theta", "1000000"), n_tokens=64),
    # Qwen3: per-head Q/K norms before RoPE, no biases, head_dim apart from n_embd / n_head (as the
    # real ones: 128 over 1024-5120 wide), tied like the small ones. Qwen3-MoE: experts in every
    # block, top 8 of 16 (the real 30B: 8 of 128), their width expert_feed_forward_length.
    Case("qwen3_f32", ("--arch", "qwen3", "--type", "f32", *SMALL, "--head-dim", "32", "--rope-theta", "1000000")),
    Case("qwen3_mix_q4_k_m", ("--arch", "qwen3", "--type", "mix-q4_k_m", *KQ, "--head-dim", "128", "--tied",
                              "--rope-theta", "1000000")),
    Case("qwen3moe_q8_0", ("--arch", "qwen3moe", "--type", "q8_0", "--n-embd", "64", "--n-ff", "32", "--n-head", "4",
                           "--n-head-kv", "2", "--head-dim", "32", "--experts", "16", "--experts-used", "8")),
    Case("qwen3moe_q4_k", _dense("qwen3moe", "q4_k", "--n-ff", "256", "--experts", "8", "--experts-used", "4")),
    # Phi-3: Q, K and V in one tensor, the FFN's gate and up in one (split at load). Phi-3.5's LongRoPE
    # past its original context (32 tokens over 16: the long factors) and within it (32 under 256: the
    # short ones), both with its attention factor; Phi-4-mini's partial rotary (24 of 32 dims), tied.
    Case("phi3_f32", _dense("phi3", "f32")),
    Case("phi3_mix_q4_k_m", _dense("phi3", "mix-q4_k_m")),
    Case("phi3_longrope_q8_0", _dense("phi3", "q8_0", "--longrope", "16")),
    Case("phi3_split_qkv_q4_0", _dense("phi3", "q4_0", "--split-qkv")),  # attn_q/k/v apart, as some files hold them
    Case("phi3_longrope_short_f32", _dense("phi3", "f32", "--n-ctx", "512", "--longrope", "256")),
    Case("phi3_partial_longrope_f32", ("--arch", "phi3", "--type", "f32", "--n-embd", "128", "--n-ff", "128", "--n-head", "4",
                                       "--n-head-kv", "2", "--rope-dim", "24", "--longrope", "16", "--tied")),
    # Phi-3-mini-4k's window (GGUF phi3.attention.sliding_window) on every layer, past it in 16-token chunks
    # (rings); llama.cpp ignores it, so the bound is that of the same model without it.
    Case("phi3_q8_0_window24", _dense("phi3", "q8_0", "--longrope", "16", "--window", "24"), n_tokens=64, ubatch=16,
         base="phi3_longrope_q8_0"),
    # A Mistral-style window on every layer (basalt --window), with and without attention sinks,
    # past it in 16-token chunks: rings of 2 blocks (and the sinks') over 5 blocks.
    Case("llama_q8_0_window40", _dense("llama", "q8_0", "--n-layer", "4"), n_tokens=300, ubatch=16, window=40,
         base="llama_q8_0_4layers_long"),
    Case("llama_q8_0_window40_sinks4", _dense("llama", "q8_0", "--n-layer", "4"), n_tokens=300, ubatch=16, window=40,
         sinks=4, base="llama_q8_0_4layers_long"),
]

# The Vulkan backend (lavapipe in CI): the same bounds against the same
# reference. "all": whole blocks (every weight format has a matmul shader;
# Gemma's GeGLU stays on the CPU; Qwen3's and Gemma 3's per-head Q/K norms are
# rows of head_dim to the norm shader) and the MoE experts; "attn":
# attention only; "experts": the MoE layers (router, routing, experts'
# matmuls and their weighted sum, all on the device).
_GPU = (("all", ("llama_q4_0", "llama_q8_0", "qwen2_gqa4_q4_1", "llama_gqa4_q8_0", "llama_moe4_top2_q4_0",
                 "llama_hd64_f32", "llama_q8_0_4layers_long", "smollm2_real", "llama_q4_k", "llama_q5_k",
                 "llama_q6_k", "llama_mix_q4_k_m", "llama_moe8_top2_q4_k", "llama_f16", "llama_bf16",
                 "llama_moe4_top2_f32", "gemma3_real", "llama_rope_yarn4_f32", "llama_rope_llama3_f32",
                 "gemma2_f32", "qwen3moe_q8_0", "phi3_partial_longrope_f32")),
        ("attn", ("llama_f32", "llama_gqa4_f32", "llama_q8_0_4layers_long", "smollm2_real", "gemma2_q4_k_hd64")),
        ("experts", ("llama_moe4_top2_q4_0", "llama_moe4_top2_q8_0")),
        ("attn,experts", ("llama_moe4_top2_q8_0",)))
_BASE = {c.name: c for c in CASES}
# The real models' prompts halved on the device: lavapipe's shaders are most of these cases' time
# (16 tokens of Gemma 3 took 51 s of a CI run), and the first 8 positions are held to the same bound.
_GPU_TOKENS = {"smollm2_real": SMOLLM2_PROMPT[:8], "gemma3_real": GEMMA3_PROMPT[:8]}
CASES += [dataclasses.replace(_BASE[n], name=f"gpu_{g.replace(',', '_')}_{n}", gpu=g, base=n,
                              tokens=_GPU_TOKENS.get(n, _BASE[n].tokens))
          for g, names in _GPU for n in names]
# Prefill in chunks, then decode token by token: the device's KV cache carries over between batches.
CASES += [dataclasses.replace(_BASE["llama_q8_0_4layers_long"], name=f"gpu_{g}_llama_q8_0_chunked", gpu=g, ubatch=u,
                              base="llama_q8_0_4layers_long")
          for g, u in (("all", 7), ("attn", 1))]
# The device lost mid-batch (injected): the engine must finish on the CPU with the same bounds.
CASES += [dataclasses.replace(_BASE["llama_q8_0_4layers_long"], name=f"gpu_{g}_lost_after_{k}", gpu=g, ubatch=u,
                              gpu_fail_after=k, base="llama_q8_0_4layers_long")
          for g, u, k in (("all", 7, 100), ("all", 0, 0), ("attn", 1, 30))]

# A device too small for the model (a memory cap): the first weights in graph
# order go to the GPU, the rest and the KV copy stay on the CPU, mixed within blocks.
# (3 MiB of the model's 7.)
CASES += [Case("gpu_all_llama_q8_0_partial", ("--arch", "llama", "--type", "q8_0", "--n-embd", "512", "--n-layer", "3",
                                              "--n-head", "8", "--n-head-kv", "2", "--n-ff", "1536"),
               n_tokens=24, gpu="all", gpu_memory_mib=3)]

# The q8 KV cache (--kv-type q8; the reference rounds K and V alike): head
# dims 64 and 32, GQA, a long context, the real model; on the CPU and on the
# device (whole model, attention decoding token by token, and the device lost
# mid-run, so the CPU's q8 cache takes over).
_Q8 = (("", ("llama_q8_0_4layers_long", "llama_gqa4_f32", "llama_hd32_q8_0", "qwen2_hd64_q4_k", "smollm2_real",
             "gemma2_q4_k_hd64")),
       ("all", ("llama_q8_0_4layers_long", "smollm2_real")),
       ("attn", ("llama_gqa4_f32",)))
CASES += [dataclasses.replace(_BASE[n], name=f"{'gpu_' + g + '_' if g else ''}kv_q8_{n}", gpu=g, kv_type="q8",
                              base=n, tokens=_GPU_TOKENS.get(n, _BASE[n].tokens) if g else _BASE[n].tokens)
          for g, names in _Q8 for n in names]
# The 4-bit caches (q4; k8v4: q8 keys, q4 values) on f32 weights, where the
# reference rounds K and V as the cache does and the products as the kernels
# do, so the base's bound holds: head dims 64 and 32, the prompt in one run and
# in runs of 7 (a q4 key group is rounded again as its positions arrive: the
# stage, runs across a group's end), on the device in runs of 7 and attention
# decoding token by token; 80 tokens: two whole key groups and a third, the
# second in a block's high nibbles.
# (On quantized weights the engine's keys differ from the reference's by the
# weights' error, and the 4-bit codes turn that into a larger logit error
# than the llama.cpp-based bounds allow.)
_Q4 = (("", 0, ("llama_hd64_f32", "llama_hd32_explicit_f32")), ("", 7, ("llama_hd64_f32",)),
       ("all", 7, ("llama_hd64_f32",)), ("attn", 1, ("llama_hd64_f32",)))
CASES += [dataclasses.replace(_BASE[n], name=f"{'gpu_' + g + '_' if g else ''}kv_{t}_{n}{f'_runs_of_{u}' if u else ''}",
                              gpu=g, ubatch=u, kv_type=t, base=n, n_tokens=80)  # 3 key groups, both nibbles
          for t in ("q4", "k8v4") for g, u, names in _Q4 for n in names]
# The q8 cache on f32 weights with whole 64-dim tile rows, where the bound is
# the base's: AMX CPUs take the prompt in one run on the int8 tiles, runs of 7
# (14 query rows) on VNNI, which must make the same integers (cpu/attention.h).
CASES += [dataclasses.replace(_BASE["llama_hd64_f32"], name=f"kv_q8_llama_hd64_f32{f'_runs_of_{u}' if u else ''}",
                              ubatch=u, kv_type="q8", base="llama_hd64_f32", n_tokens=80)
          for u in (0, 7)]
# The tiled GEMM's f16-arithmetic variant for qa weights (chosen where a
# device has f16 arithmetic but no integer dot products; lavapipe has both).
CASES += [dataclasses.replace(_BASE[n], name=f"gpu_all_fp16_{n}", gpu="all", gpu_portable="integer_dot",
                              base=n)
          for n in ("llama_q4_0", "llama_q4_k", "llama_moe4_top2_q8_0")]
# A device without 16-bit storage (the f16 KV cache as words), and one with
# no optional feature at all, decoding token by token after a chunked prefill.
CASES += [dataclasses.replace(_BASE["llama_q8_0_4layers_long"], name=f"gpu_{g}_portable_{p}", gpu=g, ubatch=u,
                              gpu_portable=p, base="llama_q8_0_4layers_long")
          for g, u, p in (("attn", 7, "storage16"), ("all", 1, "1"))]
CASES += [dataclasses.replace(_BASE["llama_q8_0_4layers_long"], name="gpu_attn_kv_q8_decode", gpu="attn", ubatch=1,
                              kv_type="q8", base="llama_q8_0_4layers_long"),
          dataclasses.replace(_BASE["llama_q8_0_4layers_long"], name="gpu_all_kv_q8_lost_after_100", gpu="all",
                              ubatch=7, gpu_fail_after=100, kv_type="q8", base="llama_q8_0_4layers_long")]

BY_NAME = {c.name: c for c in CASES}
assert len(BY_NAME) == len(CASES), "duplicate case names"


def get(name: str) -> Case:
    if name not in BY_NAME:
        raise KeyError(f"no forward case {name!r}; forward_cases.py --list shows them")
    return BY_NAME[name]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--list", action="store_true")
    g.add_argument("--show", metavar="NAME")
    ns = p.parse_args(argv)
    if ns.list:
        print("\n".join(c.name for c in CASES))
        return 0
    try:
        c = get(ns.show)
    except KeyError as e:
        print(e.args[0], file=sys.stderr)
        return 2
    print(" ".join(c.make) if c.make else f"model={c.model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
