#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# An independent numpy forward pass (llama, qwen2, Mixtral-style MoE, Gemma 2 and 3) over a GGUF file.
"""Reference logits for a GGUF model, computed in float64 numpy.

    reference_forward.py MODEL.gguf --tokens 1,2,3 --out LOGITS.npy

or, from Python: forward(path, tokens) -> float32 array [n_tokens, n_vocab].

Weights are read by gguf_file.py (the layout gguf.GGUFReader reads, faster
over a real vocabulary) and dequantized with gguf.quants.dequantize;
all arithmetic is float64, so the only error left is
the weights' own quantization, which the engine sees too.

GGUF conventions used here (checked against llama.cpp, see
validate_reference.py):
  - a weight with GGUF shape ne = [n_in, n_out] is a numpy array (n_out, n_in)
    after dequantize, and y = W @ x; 3-D expert weights ne = [n_in, n_out, E]
    are (E, n_out, n_in).
  - RoPE: llama rotates adjacent pairs (x[2i], x[2i+1]) ("normal"; the HF
    converter permutes Q/K rows for that), qwen2 rotates (x[i], x[i + n/2])
    ("NeoX"). theta_i = base^(-2i/n_rot); linear scaling divides positions.
  - Gemma 3 (HF modeling_gemma3.py): the embedding times sqrt(n_embd); RMS
    norms on each head of Q and K before RoPE and on the attention's and
    the FFN's outputs before the residual adds; GELU (tanh form) gating;
    local layers attend to the last `sliding_window` positions with RoPE
    base rope.freq_base_swa (10000), all but every sliding_window_pattern-th
    (6) layer. Its GGUF norm weights already hold HF's 1 + w.
  - Gemma 2 (HF modeling_gemma2.py): Gemma 3 without the Q and K norms, one
    RoPE base, every other layer local (0, 2, ...; window 4096 by default),
    and soft-capping: scores (after the scale) and logits become
    cap * tanh(x / cap) (attn_logit_softcapping 50, final_logit_softcapping 30).
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import gguf

from gguf_file import GgufFile

# rope ordering per architecture: False = adjacent pairs, True = NeoX halves
ROPE_NEOX = {"llama": False, "qwen2": True, "qwen3": True, "qwen3moe": True, "gemma2": True, "gemma3": True,
             "phi3": True}


class Model:
    """Metadata and lazily dequantized tensors of one GGUF file."""

    def __init__(self, path: str):
        self.path = path
        self.reader = GgufFile(path)
        self.tensors = {t.name: t for t in self.reader.tensors}
        self.arch = self.meta("general.architecture")
        if self.arch not in ROPE_NEOX:
            raise ValueError(f"{path}: architecture {self.arch!r} is not supported "
                             f"(supported: {', '.join(ROPE_NEOX)})")
        a = self.arch
        self.n_layer = self.meta(f"{a}.block_count")
        self.n_embd = self.meta(f"{a}.embedding_length")
        self.n_head = self.meta(f"{a}.attention.head_count")
        self.n_head_kv = self.meta(f"{a}.attention.head_count_kv", self.n_head)
        self.head_dim = self.meta(f"{a}.attention.key_length", self.n_embd // self.n_head)
        self.n_rot = self.meta(f"{a}.rope.dimension_count", self.head_dim)
        self.eps = self.meta(f"{a}.attention.layer_norm_rms_epsilon")
        self.rope_base = self.meta(f"{a}.rope.freq_base", 10000.0)
        self.rope_scale = 1.0
        scaling = self.meta(f"{a}.rope.scaling.type", "none")
        if scaling in ("linear", "yarn"):
            self.rope_scale = self.meta(f"{a}.rope.scaling.factor", 1.0)
        elif scaling != "none":
            raise ValueError(f"{path}: rope scaling {scaling!r} is not supported")
        self.yarn_orig_ctx = self.meta(f"{a}.rope.scaling.original_context_length", 0) if scaling == "yarn" else 0
        self.yarn_beta_fast = self.meta(f"{a}.rope.scaling.yarn_beta_fast", 32.0)
        self.yarn_beta_slow = self.meta(f"{a}.rope.scaling.yarn_beta_slow", 1.0)
        self.rope_attn_factor = self.meta(f"{a}.rope.scaling.attn_factor", 1.0)
        # Llama 3.1's scaling: each pair's frequency divisor (llama.cpp's converter)
        self.rope_factors = self.factors("rope_freqs.weight")
        # LongRoPE (Phi-3): short factors, and long ones for a context past the original
        # (llama.cpp's choice by context size: here the tokens run, as basalt-dump-logits sizes its cache)
        self.rope_short = self.factors("rope_factors_short.weight")
        self.rope_long = self.factors("rope_factors_long.weight")
        self.long_after = self.meta(f"{a}.rope.scaling.original_context_length", 0)
        self.n_expert = self.meta(f"{a}.expert_count", 0)
        self.n_expert_used = self.meta(f"{a}.expert_used_count", 0)
        self.n_vocab = int(self.tensors["token_embd.weight"].shape[1])
        self.gemma = a in ("gemma2", "gemma3")
        gemma2 = a == "gemma2"
        self.window = self.meta(f"{a}.attention.sliding_window", 4096 if gemma2 else 0) if self.gemma else 0
        self.swa_period = 2 if gemma2 else self.meta(f"{a}.attention.sliding_window_pattern", 6) if self.gemma else 0
        if a == "phi3":  # every layer's, where shorter than the context (as transformers; llama.cpp ignores it)
            window = self.meta(f"{a}.attention.sliding_window", 0)
            self.window = window if window < self.meta(f"{a}.context_length") else 0
        # Gemma 3's local layers: a RoPE base of their own, no scaling
        self.own_local_rope = a == "gemma3"
        self.rope_base_swa = self.meta(f"{a}.rope.freq_base_swa", 10000.0) if self.own_local_rope else self.rope_base
        self.attn_softcap = self.meta(f"{a}.attn_logit_softcapping", 50.0) if gemma2 else 0.0
        self.final_softcap = self.meta(f"{a}.final_logit_softcapping", 30.0 if gemma2 else 0.0) if self.gemma else 0.0
        # HF's query_pre_attn_scalar: head_dim but for the 27B models (Gemma 2: 46 layers, 3: 62): n_embd / n_head
        self.scale_dim = (self.n_embd // self.n_head if self.n_layer == (46 if gemma2 else 62) and self.gemma
                          else self.head_dim)
        self.sinks = 0

    def stream(self, window: int, sinks: int) -> None:
        """basalt's --window W --attention-sinks N (StreamingLLM) on a model without a window:
        every layer sees its first `sinks` positions and its last `window`."""
        if self.window:
            raise ValueError(f"{self.path}: the model has a sliding window of its own")
        self.window, self.swa_period, self.sinks = window, 0, sinks

    def local(self, i: int) -> bool:
        """Whether layer i attends through the sliding window."""
        return self.window > 0 and (self.swa_period == 0 or i % self.swa_period != self.swa_period - 1)

    def factors(self, name: str) -> np.ndarray | None:
        return np.asarray(self.tensors[name].data, dtype=np.float64) if name in self.tensors else None

    def meta(self, key: str, default=None):
        value = self.reader.fields.get(key)
        if value is None:
            if default is None:
                raise KeyError(f"{self.path}: metadata key {key} is missing")
            return default
        return value

    def has(self, name: str) -> bool:
        return name in self.tensors

    def get(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """Tensor as float64, numpy shape = reversed GGUF ne; rows: pick rows first."""
        t = self.tensors.get(name)
        if t is None:
            raise KeyError(f"{self.path}: tensor {name} is missing")
        data = t.data if rows is None else t.data[rows]
        x = gguf.quants.dequantize(np.ascontiguousarray(data), t.tensor_type)
        shape = tuple(int(n) for n in reversed(t.shape))
        if rows is not None:
            shape = (len(rows),) + shape[1:]
        return x.reshape(shape).astype(np.float64)


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    # x: [n_tok, d]
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def to_bf16(x: np.ndarray) -> np.ndarray:
    """x rounded to bfloat16 (to nearest even, through float32), as float64."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def rope_freqs(m: "Model", base: float, scaled: bool, n_ctx: int) -> tuple[np.ndarray, float]:
    """Each pair's frequency and the cos/sin scale, as transformers' RoPE init
    functions define them (default, linear, llama3 as stored factors, and
    _compute_yarn_parameters; LongRoPE's set by the context's size n_ctx). Gemma 3's
    local layers (scaled=False) take none."""
    dim = m.n_rot
    inv_freq = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    if not scaled:
        return inv_freq, 1.0
    if m.rope_factors is not None:
        inv_freq = inv_freq / m.rope_factors
    if m.rope_long is not None:  # LongRoPE, as transformers' _compute_longrope_parameters
        inv_freq = inv_freq / (m.rope_long if n_ctx > m.long_after else m.rope_short)
    factor = m.rope_scale
    if not m.yarn_orig_ctx:
        return inv_freq / factor, m.rope_attn_factor

    def correction_dim(turns: float) -> float:  # the pair making `turns` turns in the original context
        return dim * math.log(m.yarn_orig_ctx / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(m.yarn_beta_fast)), 0)
    high = min(math.ceil(correction_dim(m.yarn_beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    inv_freq = inv_freq / factor * (1 - extrapolation) + inv_freq * extrapolation
    return inv_freq, m.rope_attn_factor * (0.1 * math.log(factor) + 1.0)


def rope(x: np.ndarray, pos: np.ndarray, n_rot: int, freqs: np.ndarray, mscale: float,
         neox: bool) -> np.ndarray:
    # x: [n_tok, n_heads, head_dim]; rotates the first n_rot dims of each head
    half = n_rot // 2
    ang = pos.astype(np.float64)[:, None] * freqs[None, :]         # [n_tok, half]
    cos, sin = mscale * np.cos(ang)[:, None, :], mscale * np.sin(ang)[:, None, :]
    out = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:n_rot]
        out[..., :half] = a * cos - b * sin
        out[..., half:n_rot] = a * sin + b * cos
    else:
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = a * cos - b * sin
        out[..., 1:n_rot:2] = a * sin + b * cos
    return out


def q8_codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """basalt's q8 cache of x [n_tok, n_kv, hd]: int8 codes (as float64) and
    the scale of each (token, head), max|x| / 127 (float32, as float64)."""
    x32 = x.astype(np.float32)
    amax = np.abs(x32).max(axis=-1, keepdims=True)
    inv = np.float32(127) / np.where(amax > 0, amax, np.float32(1))
    q = np.rint(x32 * np.where(amax > 0, inv, np.float32(0)))
    return q.astype(np.float64), (amax / np.float32(127)).astype(np.float64)


def kv_rotation(hd: int) -> np.ndarray:
    """core/graph/kv_rotation.h's H for a head of hd dimensions: the normalized
    Walsh-Hadamard matrix over blocks of hd (a power of two) or 32 dimensions;
    orthogonal and symmetric, so its own inverse."""
    n = hd if hd & (hd - 1) == 0 else 32
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return np.kron(np.eye(hd // n), h / np.sqrt(n))


def keys_rotated(kv_type: str, hd: int) -> bool:
    """kv_cache.h's kv_keys_rotated: q8 keys where the rotation covers the head."""
    return KV_SIDES.get(kv_type, ("f16",))[0] == "q8" and (hd & (hd - 1) == 0 or hd % 32 == 0) and hd <= 512


def round_kv(x: np.ndarray, kv_type: str, rotated: bool = False) -> np.ndarray:
    """What the engine's KV cache holds of x [n_tok, n_kv, hd]. f16: x (its
    rounding error is far inside every bound); q8 (basalt --kv-type q8): per
    (token, head) int8 with scale max|x| / 127, x * (127 / max|x|) rounded to
    nearest even, as core/graph/kv_cache.cpp's quantize_kv_q8; rotated (the
    keys, keys_rotated): of H x, read back as H (its rounding)."""
    if kv_type != "q8":
        return x
    if rotated:
        rot = kv_rotation(x.shape[-1])
        return round_kv(x @ rot, kv_type) @ rot
    q, scale = q8_codes(x)
    return (q.astype(np.float32) * scale.astype(np.float32)).astype(x.dtype)


KV_SIDES = {"f16": ("f16", "f16"), "q8": ("q8", "q8"), "q4": ("q4", "q4"), "k8v4": ("q8", "q4")}  # (keys, values)


def f16(x: np.ndarray) -> np.ndarray:
    """float32 x rounded to f16 (to nearest even), as float32."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def q4_keys(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """basalt's q4 keys of x [n_tok, n_kv, hd], every position stored in one
    run: (codes, step, minimum), each [n_tok, n_kv, hd] (a position's its
    group's), key ~ minimum + step * code. Per channel (KV head, dim) over
    groups of 32 positions, the positions in f16 (the stage's), float32 as
    core/graph/kv_cache.cpp's quantize_kv_q4_keys and KeyRounding."""
    xf = f16(x)
    codes, step, minimum = np.empty_like(xf), np.empty_like(xf), np.empty_like(xf)
    for g in range(0, len(xf), 32):
        blk = xf[g:g + 32]
        lo, hi = blk.min(axis=0), blk.max(axis=0)
        d, mn = f16((hi - lo) / np.float32(15)), f16(lo)
        ok = (d > 0) & np.isfinite(d)
        inv = np.where(ok, np.float32(1) / np.where(ok, d, np.float32(1)), np.float32(0)).astype(np.float32)
        codes[g:g + 32] = np.clip(np.floor((blk - mn) * inv + np.float32(0.5)), 0, 15)
        step[g:g + 32], minimum[g:g + 32] = d, mn
    return codes.astype(np.float64), step.astype(np.float64), minimum.astype(np.float64)


def q4_values(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """basalt's q4 values of x [n_tok, n_kv, hd]: (codes - 8, scale), each
    [n_tok, n_kv, hd] (a dim's its group's), of the rotated head H x ~ scale *
    (code - 8): per 32 dims llama.cpp's q4_0, d = m / -8 with m the first
    value of largest magnitude, as core/graph/kv_cache.cpp's quantize_kv_q4."""
    n, kv, hd = x.shape
    y = (x @ kv_rotation(hd)).astype(np.float32).reshape(n, kv, hd // 32, 32)
    m = np.take_along_axis(y, np.abs(y).argmax(axis=-1)[..., None], axis=-1)
    d = m / np.float32(-8)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
    codes = np.trunc(np.clip(y * inv + np.float32(8.5), 0, 15))
    scale = np.broadcast_to(f16(d), y.shape)
    return (codes - 8).reshape(n, kv, hd).astype(np.float64), scale.reshape(n, kv, hd).astype(np.float64)


def int15_per_block(w: np.ndarray) -> np.ndarray:
    """w [heads, rows, positions] as the kernels' integer P V rounds it: per block
    of 64 positions, to 15 bits and a sign over the block's largest magnitude
    (codes -32767..32767)."""
    n = w.shape[-1]
    blocks = np.pad(w, ((0, 0), (0, 0), (0, -n % 64))).reshape(w.shape[0], w.shape[1], -1, 64)
    step = np.abs(blocks).max(axis=-1, keepdims=True) / 32767
    safe = np.where(step > 0, step, 1)
    return (np.rint(blocks / safe) * step).reshape(w.shape[0], w.shape[1], -1)[..., :n]


def dots_qk(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Scores [head, query, key] of queries [query, head, dim] and keys [key, head, dim]
    (einsum "ihd,jhd->hij" as a batched matmul, which numpy hands to BLAS)."""
    return np.matmul(q.transpose(1, 0, 2), k.transpose(1, 2, 0))


def weigh_values(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Weights [head, query, key] times values [key, head, dim] -> [query, head, dim] ("hij,jhd->ihd")."""
    return np.matmul(w, v.transpose(1, 0, 2)).transpose(1, 0, 2)


def attention(m: Model, i: int, h: np.ndarray, pos: np.ndarray, kv_type: str = "f16",
              dots: str = "f32", ubatch: int = 0) -> np.ndarray:
    # h: [n_tok, d] (normed) -> [n_tok, d]
    p = f"blk.{i}."
    n_tok, hd = h.shape[0], m.head_dim

    def proj(name: str) -> np.ndarray:
        y = h @ m.get(p + name + ".weight").T                     # W (n_out, d) @ h
        if m.has(p + name + ".bias"):
            y = y + m.get(p + name + ".bias")
        return y

    if m.has(p + "attn_qkv.weight"):  # Phi-3: Q, K and V rows in one tensor
        q, k, v = np.split(proj("attn_qkv"), [m.n_head * hd, (m.n_head + m.n_head_kv) * hd], axis=1)
    else:
        q, k, v = proj("attn_q"), proj("attn_k"), proj("attn_v")
    q = q.reshape(n_tok, m.n_head, hd)
    k = k.reshape(n_tok, m.n_head_kv, hd)
    v = v.reshape(n_tok, m.n_head_kv, hd)
    if m.has(p + "attn_q_norm.weight"):  # Gemma 3, Qwen3: per head, before RoPE
        q = rms_norm(q, m.get(p + "attn_q_norm.weight"), m.eps)
        k = rms_norm(k, m.get(p + "attn_k_norm.weight"), m.eps)
    neox = ROPE_NEOX[m.arch]
    local_rope = m.own_local_rope and m.local(i)
    n_ctx = len(pos)  # every position of the run: LongRoPE's factor set follows it
    freqs, mscale = rope_freqs(m, m.rope_base_swa, False, n_ctx) if local_rope else rope_freqs(m, m.rope_base, True, n_ctx)
    q = rope(q, pos, m.n_rot, freqs, mscale, neox)
    k = rope(k, pos, m.n_rot, freqs, mscale, neox)
    key_side, value_side = KV_SIDES.get(kv_type, ("f16", "f16"))
    group = m.n_head // m.n_head_kv                                # query heads per kv head
    rep = lambda x: np.repeat(x, group, axis=1)                    # [n_tok, n_kv, .] -> [n_tok, n_head, .]
    scale_dim = m.scale_dim
    qs = q / np.sqrt(scale_dim)                                    # the query as the kernels scale it
    rotated = keys_rotated(kv_type, hd)
    if dots == "bf16" and key_side == "f16" and hd % 32 == 0:      # the f16 cache through bf16 dots: what it rounds
        qs = to_bf16(qs)
    if dots.startswith("int8_query") and key_side == "q8" and hd % 4 == 0:  # the scaled query per head in int8
        rot = kv_rotation(hd) if rotated else np.eye(hd)           # (rotated as the keys were)
        qr = (qs @ rot).astype(np.float32)
        amax = np.abs(qr).max(axis=-1, keepdims=True)
        inv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, np.float32(1)), np.float32(0))
        qs = (np.rint(qr * inv).astype(np.float64) * (amax / np.float32(127)).astype(np.float64)) @ rot
    if key_side == "q4":
        # A chunk's queries (ubatch tokens a run) see its keys' groups rounded over the positions stored so far.
        scores = np.zeros((m.n_head, n_tok, n_tok))
        for c0 in range(0, n_tok, ubatch or n_tok):
            c1 = min(n_tok, c0 + (ubatch or n_tok))
            codes, step, mn = (rep(a) for a in q4_keys(k[:c1]))
            if dots == "bf16" and hd % 32 == 0:  # the query times a group's steps in bf16, on the codes, plus the minimums' term
                qg = to_bf16(qs[c0:c1, None].astype(np.float32) * step[None].astype(np.float32))  # [query, key, head, dim]
                scores[:, c0:c1, :c1] = (np.einsum("ijhd,jhd->hij", qg, codes - 8)
                                         + dots_qk(qs[c0:c1], mn + 8 * step))
            else:
                scores[:, c0:c1, :c1] = dots_qk(qs[c0:c1], mn + step * codes)
    else:
        kk = rep(round_kv(k, key_side, rotated))
        if dots == "bf16" and key_side == "f16" and hd % 32 == 0:
            kk = to_bf16(kk.astype(np.float16))
        scores = dots_qk(qs, kk)
    if m.attn_softcap:
        scores = m.attn_softcap * np.tanh(scores / m.attn_softcap)
    masked = np.triu(np.ones((n_tok, n_tok), dtype=bool), k=1)       # keys after the query
    if m.local(i):                                                 # keys window or more before it,
        outside = np.tril(np.ones((n_tok, n_tok), dtype=bool), k=-m.window)
        outside[:, :m.sinks] = False                               # but the attention sinks
        masked |= outside
    scores[:, masked] = -np.inf
    # (The kernels' softmax keeps a running max per block of 64 keys, so past 64 keys the weights
    # they round to bf16 are scaled otherwise than these: NMSE ~5e-9 on the f32 forward cases.)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    bf16_p = (dots == "bf16" or dots == "int8_query_bf16_p") and hd % 32 == 0
    int_p = dots in ("int8_query_int_p", "int_p")
    if value_side == "q4":
        cm8, vscale = (rep(a) for a in q4_values(v))
        if int_p:  # P times each group's scales to 15 bits a block, on the codes, over the unrounded sum
            out = np.empty((n_tok, m.n_head, hd))
            for g in range(0, hd, 32):
                wg = int15_per_block(e * vscale[:, :, g].T[:, None, :])
                out[..., g:g + 32] = weigh_values(wg, cm8[..., g:g + 32])
            out /= e.sum(axis=-1).T[..., None]
        elif bf16_p:  # P times each group's scales in bf16, on the codes, over the unrounded sum
            out = np.empty((n_tok, m.n_head, hd))
            for g in range(0, hd, 32):
                wg = to_bf16(e * vscale[:, :, g].T[:, None, :])
                out[..., g:g + 32] = weigh_values(wg, cm8[..., g:g + 32])
            out /= e.sum(axis=-1).T[..., None]
        else:
            out = weigh_values(e / e.sum(axis=-1, keepdims=True), vscale * cm8)
        out = out @ kv_rotation(hd)                                # the values were stored rotated
    elif value_side == "q8" and dots == "int8_query_bf16_p" and hd % 32 == 0:
        # the weights exp(s - max) times each value's scale in bf16, on the codes, over the unrounded sum
        codes, scale = q8_codes(v)
        w = to_bf16(e * rep(scale)[..., 0].T[:, None, :]) / e.sum(axis=-1, keepdims=True)
        out = weigh_values(w, rep(codes))
    elif value_side == "q8" and int_p:
        # the weights exp(s - max) times each value's scale to 15 bits a block, on the codes, over the unrounded sum
        codes, scale = q8_codes(v)
        w = int15_per_block(e * rep(scale)[..., 0].T[:, None, :])
        out = weigh_values(w / e.sum(axis=-1, keepdims=True), rep(codes))
    else:
        vv = rep(round_kv(v, value_side))
        if value_side == "f16" and bf16_p and key_side == "f16":  # P V with the weights in bf16, over their unrounded sum
            w, vv = to_bf16(e) / e.sum(axis=-1, keepdims=True), to_bf16(vv.astype(np.float16))
        else:
            w = e / e.sum(axis=-1, keepdims=True)
        out = weigh_values(w, vv)
    return out.reshape(n_tok, m.n_head * hd) @ m.get(p + "attn_output.weight").T


def router_margin(logits: np.ndarray, k: int) -> np.ndarray:
    """Per token: gap between the k-th and (k+1)-th router logit / rms of all logits.

    A small margin is a near-tie the reference cannot decide: an engine within
    its error bound may route that token to either expert."""
    z = np.sort(logits, axis=-1)[:, ::-1]                          # [n_tok, E] descending
    if k >= z.shape[1]:
        return np.full(z.shape[0], np.inf)
    return (z[:, k - 1] - z[:, k]) / np.sqrt(np.mean(logits * logits))


def ffn(m: Model, i: int, h: np.ndarray, trace: dict | None = None) -> np.ndarray:
    # h: [n_tok, d] (normed) -> [n_tok, d]; SwiGLU: down(silu(gate h) * up h)
    p = f"blk.{i}."
    if not m.has(p + "ffn_gate_inp.weight"):
        if m.has(p + "ffn_gate.weight"):
            g, u = h @ m.get(p + "ffn_gate.weight").T, h @ m.get(p + "ffn_up.weight").T
        else:  # Phi-3: the gate's rows then the up's in ffn_up
            g, u = np.split(h @ m.get(p + "ffn_up.weight").T, 2, axis=1)
        return ((gelu_tanh(g) if m.gemma else silu(g)) * u) @ m.get(p + "ffn_down.weight").T
    # MoE: softmax over all experts, keep top k, renormalize the k weights
    logits = h @ m.get(p + "ffn_gate_inp.weight").T                # [n_tok, E]
    if trace is not None:
        margin = router_margin(logits, m.n_expert_used)
        trace["router_margin"] = np.minimum(trace.get("router_margin", margin), margin)
    probs = softmax(logits)
    top = np.argsort(-probs, axis=-1, kind="stable")[:, :m.n_expert_used]
    gate = m.get(p + "ffn_gate_exps.weight")                       # [E, n_ff, d]
    up = m.get(p + "ffn_up_exps.weight")                           # [E, n_ff, d]
    down = m.get(p + "ffn_down_exps.weight")                       # [E, d, n_ff]
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        w = probs[t, top[t]]
        w = w / w.sum()
        for e, we in zip(top[t], w):
            y = silu(gate[e] @ h[t]) * (up[e] @ h[t])
            out[t] += we * (down[e] @ y)
    return out


def forward_model(m: Model, tokens: list[int], trace: dict | None = None, kv_type: str = "f16",
                  dots: str = "f32", ubatch: int = 0) -> np.ndarray:
    """Logits [n_tokens, n_vocab] float32 for tokens at positions 0..n-1, with
    the engine's KV cache type (f16, q8: round_kv; q4 and k8v4's q4 side:
    q4_keys, q4_values) and what its attention kernels round (dots: "f32",
    nothing; "bf16", q, k, v and the softmax weights of heads of whole 32-dim
    vectors, or with a q4 cache the query times the keys' steps and the
    weights times the values' scales; "int8_query", the query to int8 per
    head; "int8_query_bf16_p", that and the weights times q8 or q4 values'
    scales in bf16; "int8_query_int_p", that query and the weights times q8
    or q4 values' scales to 15 bits per block of 64 positions; "int_p", that
    P V alone). ubatch: the engine's tokens per run, which q4 keys'
    groups depend on (each run rounds its groups over the positions so far).

    trace, if given, receives "router_margin": [n_tokens], the smallest
    router_margin over the MoE layers (absent for dense models)."""
    ids = np.asarray(tokens, dtype=np.int64)
    if ids.size == 0:
        raise ValueError("no tokens")
    if ids.min() < 0 or ids.max() >= m.n_vocab:
        raise ValueError(f"token id out of range 0..{m.n_vocab - 1}: {ids.min()}..{ids.max()}")
    pos = np.arange(len(ids), dtype=np.float64)
    x = m.get("token_embd.weight", rows=ids)                      # [n_tok, d]
    if m.gemma:
        x = x * np.sqrt(m.n_embd)
    post = (lambda i, name, y: rms_norm(y, m.get(f"blk.{i}.{name}.weight"), m.eps)) if m.gemma else (lambda i, name, y: y)
    for i in range(m.n_layer):
        p = f"blk.{i}."
        x = x + post(i, "post_attention_norm",
                     attention(m, i, rms_norm(x, m.get(p + "attn_norm.weight"), m.eps), pos, kv_type, dots, ubatch))
        x = x + post(i, "post_ffw_norm", ffn(m, i, rms_norm(x, m.get(p + "ffn_norm.weight"), m.eps), trace))
    x = rms_norm(x, m.get("output_norm.weight"), m.eps)
    head = "output.weight" if m.has("output.weight") else "token_embd.weight"  # tied
    logits = np.empty((len(ids), m.n_vocab), dtype=np.float32)
    for v0 in range(0, m.n_vocab, 16384):  # by slices of the vocabulary: a real one's float64 logits are gigabytes
        rows = np.arange(v0, min(v0 + 16384, m.n_vocab))
        y = x @ m.get(head, rows=rows).T
        if m.final_softcap:
            y = m.final_softcap * np.tanh(y / m.final_softcap)
        logits[:, rows] = y
    return logits


def forward(path: str, tokens: list[int]) -> np.ndarray:
    return forward_model(Model(path), tokens)


def parse_tokens(text: str) -> list[int]:
    try:
        return [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--tokens wants comma-separated ids, got {text!r}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--tokens", type=parse_tokens, required=True, help="e.g. 1,2,3")
    p.add_argument("--out", required=True, help="output .npy, float32 [n_tokens, n_vocab]")
    ns = p.parse_args(argv)
    try:
        logits = forward(ns.model, ns.tokens)
    except (ValueError, KeyError) as e:
        print(f"reference_forward: {e}", file=sys.stderr)
        return 2
    np.save(ns.out, logits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
