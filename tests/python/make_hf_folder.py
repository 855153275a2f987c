#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write an HF model folder holding the same model as a GGUF file.

    make_hf_folder.py MODEL.gguf OUT_DIR [--shards N] [--vocab-only] [--pre NAME] [--space-prefix B] [--add-bos B] [--metaspace]
                      [--split-spaces]
                      [--sliding-window W [--global-every N]] [--layer-types] [--multimodal old|new] [--rope-parameters]

The GGUF must have dense tensors (F32, F16, BF16), e.g. one written by
make_model.py. The folder gets config.json, model.safetensors (or N shards
and model.safetensors.index.json), tokenizer.json, tokenizer_config.json and
generation_config.json, laid out as transformers writes them: PyTorch names,
[out, in] matrices, Q and K rows in the rotate-half order (GGUF llama files
hold them interleaved: undone here), Mixtral experts as separate tensors,
Gemma's norm weights as w where GGUF files hold 1 + w. --multimodal writes a
Gemma 3 as Gemma3ForConditionalGeneration: a text_config naming only what
differs from transformers' defaults, the text model's tensors under
language_model.model. (old: transformers before 4.52) or
model.language_model. (new), and a vision tower tensor beside them.
basalt must give the same logits and token ids for both (tests/python/check_hf.py).
--vocab-only writes just the tokenizer files (for the real SmolLM2 and Gemma 3
vocabularies); --pre gives a byte-level BPE one another pre-tokenizer, and
--space-prefix / --add-bos / --metaspace / --split-spaces a SentencePiece one other settings
(the tokenizer reference files do too).
"""
from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path

import gguf
import numpy as np

from gguf_file import GgufFile

# GGUF tokenizer.ggml.pre -> the tokenizer.json pre_tokenizer transformers writes for it.
_LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def _byte_level(use_regex: bool) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def _split(regex: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


PRE_TOKENIZERS = {
    "gpt2": _byte_level(True),
    "smollm": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, _byte_level(True)]},
    "llama-bpe": {"type": "Sequence", "pretokenizers": [_split(_LLAMA3_REGEX), _byte_level(False)]},
    "qwen2": {"type": "Sequence", "pretokenizers": [_split(_QWEN2_REGEX), _byte_level(False)]},
}
PRE_TOKENIZERS["gpt-2"] = PRE_TOKENIZERS["gpt2"]


def field(r: GgufFile | dict, key: str, default=None):
    value = (r if isinstance(r, dict) else r.fields).get(key)
    return default if value is None else value


# transformers' Gemma3TextConfig defaults: a multimodal config's text_config leaves these out.
GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
    "query_pre_attn_scalar": 256, "sliding_window": 4096, "sliding_window_pattern": 6,
    "final_logit_softcapping": None, "attn_logit_softcapping": None, "model_type": "gemma3_text"}

SPACE = "\u2581"


def spm_merges(tokens: list[str], scores: list[float]) -> list[list[str]]:
    """BPE merges for a SentencePiece vocabulary, as transformers' SentencePieceExtractor makes them:
    every split of a piece into two pieces, ordered by the piece's score (best first), then the halves' ids."""
    ids = {t: i for i, t in enumerate(tokens)}
    merges = []
    for t, score in zip(tokens, scores):
        local = [(t[:k], t[k:]) for k in range(1, len(t)) if t[:k] in ids and t[k:] in ids]
        local.sort(key=lambda m: (ids[m[0]], ids[m[1]]))
        merges.extend((score, a, b) for a, b in local)
    merges.sort(key=lambda m: -m[0])  # stable: ties keep the order above
    return [[a, b] for _, a, b in merges]


def spm_tokenizer(r: GgufFile | dict, tokens: list[str], types: list[int], space_prefix: bool, metaspace: bool,
                  split_spaces: bool = False) -> dict:
    """tokenizer.json for a SentencePiece vocabulary, as transformers converts Llama 2 / Gemma ones:
    BPE with byte fallback, spaces as U+2581 by a normalizer (or, newer, the Metaspace pre-tokenizer).
    split_spaces: the Split(" ", merged_with_previous) pre-tokenizer newer transformers give Gemma's
    (after the normalizer there is no space left to split at)."""
    scores = field(r, "tokenizer.ggml.scores")
    unk = field(r, "tokenizer.ggml.unknown_token_id")
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": ty == 3} for i, (t, ty) in enumerate(zip(tokens, types)) if ty in (3, 4)]
    if metaspace:
        normalizer = None
        pre = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "first" if space_prefix else "never", "split": False}
    else:
        replace = {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}
        normalizer = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": SPACE}, replace]} if space_prefix else replace
        pre = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False} if split_spaces else None
    decoder = [{"type": "Replace", "pattern": {"String": SPACE}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]
    if space_prefix:
        decoder.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": normalizer,
        "pre_tokenizer": pre, "post_processor": None, "decoder": {"type": "Sequence", "decoders": decoder},
        "model": {"type": "BPE", "dropout": None, "unk_token": tokens[unk] if unk is not None else None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "ignore_merges": False, "vocab": {t: i for i, t in enumerate(tokens)}, "merges": spm_merges(tokens, scores)},
    }


def write_tokenizer(r: GgufFile | dict, out: Path, pre: str | None = None, space_prefix: bool | None = None,
                    add_bos: bool | None = None, metaspace: bool = False, split_spaces: bool = False) -> None:
    if field(r, "tokenizer.ggml.model") == "llama":
        write_spm_tokenizer(r, out, space_prefix, add_bos, metaspace, split_spaces)
        return
    if field(r, "tokenizer.ggml.model") != "gpt2":
        raise SystemExit("only byte-level BPE (gpt2) and SentencePiece (llama) vocabularies can be written")
    pre = pre or field(r, "tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise SystemExit(f"pre-tokenizer {pre!r}: no tokenizer.json form known here ({', '.join(PRE_TOKENIZERS)})")
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type", [1] * len(tokens))
    merges = field(r, "tokenizer.ggml.merges", [])
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 3]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": PRE_TOKENIZERS[pre],
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": [m.split(" ", 1) for m in merges]},
    }
    (out / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    write_tokenizer_configs(r, out, tokens, {"tokenizer_class": "GPT2Tokenizer",
                                             "add_bos_token": bool(field(r, "tokenizer.ggml.add_bos_token", False))})


def write_tokenizer_configs(r: GgufFile | dict, out: Path, tokens: list[str], cfg: dict) -> None:
    """tokenizer_config.json (cfg + the special tokens and chat template) and generation_config.json."""
    name = lambda key: tokens[field(r, key)] if field(r, key) is not None else None
    cfg |= {"bos_token": name("tokenizer.ggml.bos_token_id"), "eos_token": name("tokenizer.ggml.eos_token_id"),
            "unk_token": name("tokenizer.ggml.unknown_token_id"), "pad_token": name("tokenizer.ggml.padding_token_id")}
    template = field(r, "tokenizer.chat_template")
    if template is not None:
        cfg["chat_template"] = template
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False, indent=2))
    gen = {"bos_token_id": field(r, "tokenizer.ggml.bos_token_id"), "eos_token_id": field(r, "tokenizer.ggml.eos_token_id")}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2))


def write_spm_tokenizer(r: GgufFile | dict, out: Path, space_prefix: bool | None, add_bos: bool | None, metaspace: bool,
                        split_spaces: bool) -> None:
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type", [1] * len(tokens))
    space_prefix = bool(field(r, "tokenizer.ggml.add_space_prefix", True)) if space_prefix is None else space_prefix
    add_bos = bool(field(r, "tokenizer.ggml.add_bos_token", True)) if add_bos is None else add_bos
    (out / "tokenizer.json").write_text(json.dumps(spm_tokenizer(r, tokens, types, space_prefix, metaspace, split_spaces),
                                                   ensure_ascii=False))
    write_tokenizer_configs(r, out, tokens, {"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": add_bos,
                                             "add_eos_token": False})


def tensor(r: GgufFile, name: str) -> tuple[np.ndarray, str]:
    """The tensor as float32 in numpy (PyTorch) order, and its safetensors dtype."""
    t = next((t for t in r.tensors if t.name == name), None)
    if t is None:
        raise KeyError(name)
    kinds = {gguf.GGMLQuantizationType.F32: "F32", gguf.GGMLQuantizationType.F16: "F16",
             gguf.GGMLQuantizationType.BF16: "BF16"}
    if t.tensor_type not in kinds:
        raise SystemExit(f"{name}: {t.tensor_type.name} is not a dense type (F32, F16, BF16)")
    x = gguf.quants.dequantize(np.ascontiguousarray(t.data), t.tensor_type).astype(np.float32)
    return x.reshape(tuple(int(n) for n in reversed(t.shape))), kinds[t.tensor_type]


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """GGUF llama Q/K rows (pairs interleaved) back to HF's rotate-half order."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def encode(x: np.ndarray, dtype: str) -> bytes:
    if dtype == "I32":
        return x.astype("<i4").tobytes()
    if dtype == "F32":
        return x.astype("<f4").tobytes()
    if dtype == "F16":
        return x.astype("<f2").tobytes()
    return (x.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()  # exact: the values came from BF16


def write_safetensors(path: Path, tensors: list[tuple[str, np.ndarray, str]]) -> None:
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, x, dtype in tensors:
        b = encode(x, dtype)
        header[name] = {"dtype": dtype, "shape": list(x.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("gguf")
    p.add_argument("out")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--vocab-only", action="store_true")
    p.add_argument("--pre", choices=sorted(PRE_TOKENIZERS), help="pre-tokenizer instead of the GGUF's")
    p.add_argument("--space-prefix", choices=["true", "false"], help="SentencePiece: U+2581 before the text (default: the GGUF's)")
    p.add_argument("--add-bos", choices=["true", "false"], help="SentencePiece: add BOS (default: the GGUF's)")
    p.add_argument("--metaspace", action="store_true", help="SentencePiece: the Metaspace pre-tokenizer, not a normalizer")
    p.add_argument("--split-spaces", action="store_true",
                   help="SentencePiece: Gemma's Split(\" \", merged_with_previous) pre-tokenizer after the normalizer")
    p.add_argument("--sliding-window", type=int, default=0,
                   help="a Mistral config (a Phi-3 one for phi3) whose layers attend to their last N positions")
    p.add_argument("--global-every", type=int, default=0,
                   help="with --sliding-window: every Nth layer attends to all (layer_types, as Gemma 3's)")
    p.add_argument("--layer-types", action="store_true",
                   help="Gemma 3: name each layer's attention (layer_types) instead of sliding_window_pattern")
    p.add_argument("--multimodal", choices=["old", "new"], help="Gemma 3: as Gemma3ForConditionalGeneration")
    p.add_argument("--rope-parameters", action="store_true",
                   help="RoPE as transformers 5 writes it (rope_parameters, not rope_theta / rope_scaling)")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    flag = lambda v: None if v is None else v == "true"
    if a.vocab_only:
        write_tokenizer(GgufFile(a.gguf), out, a.pre, flag(a.space_prefix), flag(a.add_bos), a.metaspace, a.split_spaces)
        return 0
    r = GgufFile(a.gguf)
    write_tokenizer(r, out, a.pre, flag(a.space_prefix), flag(a.add_bos), a.metaspace, a.split_spaces)

    arch = field(r, "general.architecture")
    k = lambda key, default=None: field(r, f"{arch}.{key}", default)
    n_head, n_head_kv = k("attention.head_count"), k("attention.head_count_kv", k("attention.head_count"))
    n_embd, n_layer = k("embedding_length"), k("block_count")
    n_expert = k("expert_count", 0)
    gemma = arch in ("gemma2", "gemma3")
    names = {t.name for t in r.tensors}
    embd, embd_dtype = tensor(r, "token_embd.weight")
    cls, model_type = {"llama": ("MixtralForCausalLM", "mixtral") if n_expert else ("LlamaForCausalLM", "llama"),
                       "qwen2": ("Qwen2ForCausalLM", "qwen2"), "qwen3": ("Qwen3ForCausalLM", "qwen3"),
                       "qwen3moe": ("Qwen3MoeForCausalLM", "qwen3_moe"), "gemma2": ("Gemma2ForCausalLM", "gemma2"),
                       "gemma3": ("Gemma3ForCausalLM", "gemma3_text"), "phi3": ("Phi3ForCausalLM", "phi3")}[arch]
    head_dim = k("attention.key_length", n_embd // n_head)
    config = {
        "architectures": [cls], "model_type": model_type,
        "vocab_size": int(embd.shape[0]), "hidden_size": n_embd, "num_hidden_layers": n_layer,
        "num_attention_heads": n_head, "num_key_value_heads": n_head_kv,
        "head_dim": head_dim, "intermediate_size": k("feed_forward_length"),
        "max_position_embeddings": k("context_length", 2048), "rms_norm_eps": k("attention.layer_norm_rms_epsilon"),
        "rope_theta": k("rope.freq_base", 10000.0), "tie_word_embeddings": "output.weight" not in names,
        "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[embd_dtype],
    }
    if k("rope.scaling.type", "none") == "linear":
        config["rope_scaling"] = {"rope_type": "linear", "factor": k("rope.scaling.factor")}
    if k("rope.dimension_count", head_dim) != head_dim:  # Phi-4-mini: 3/4 of each head
        config["partial_rotary_factor"] = k("rope.dimension_count") / head_dim
    if "rope_factors_long.weight" in names:  # as Phi-3.5's config.json: the attention factor left to transformers
        factors = lambda name: [float(x) for x in tensor(r, name)[0]]
        config["original_max_position_embeddings"] = k("rope.scaling.original_context_length")
        config["rope_scaling"] = {"type": "longrope", "short_factor": factors("rope_factors_short.weight"),
                                  "long_factor": factors("rope_factors_long.weight")}
    if arch == "phi3":  # no window (Phi-3.5's is past its context), no pad token (Phi3Config's default, 32000, is)
        config |= {"sliding_window": None, "pad_token_id": None}
    if n_expert and arch == "qwen3moe":  # as Qwen3-30B-A3B's config.json (transformers' Qwen3MoeConfig)
        config |= {"num_experts": n_expert, "num_experts_per_tok": k("expert_used_count"),
                   "moe_intermediate_size": k("expert_feed_forward_length"), "norm_topk_prob": True,
                   "decoder_sparse_step": 1, "mlp_only_layers": []}
    elif n_expert:
        config["num_local_experts"], config["num_experts_per_tok"] = n_expert, k("expert_used_count")
    if arch == "qwen2":
        config["use_sliding_window"] = False
    if arch in ("qwen3", "qwen3moe"):
        config |= {"use_sliding_window": False, "sliding_window": None, "max_window_layers": n_layer}
    if gemma:  # as the engine reads the GGUF: queries scaled by head_dim^-1/2, GELU's tanh form
        config |= {"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": head_dim,
                   "sliding_window": k("attention.sliding_window")}
    if arch == "gemma2":
        config |= {"attn_logit_softcapping": k("attn_logit_softcapping"), "final_logit_softcapping": k("final_logit_softcapping")}
    if arch == "gemma3":
        period = k("attention.sliding_window_pattern", 6)
        config |= {"rope_local_base_freq": k("rope.freq_base_swa", 10000.0), "final_logit_softcapping": None,
                   "attn_logit_softcapping": None, "sliding_window_pattern": period}
        if a.layer_types:
            del config["sliding_window_pattern"]
            config["layer_types"] = ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(n_layer)]
    if a.sliding_window and arch == "phi3":  # Phi-3-mini-4k's window, on every layer
        config["sliding_window"] = a.sliding_window
    elif a.sliding_window:
        config["architectures"], config["model_type"], config["sliding_window"] = ["MistralForCausalLM"], "mistral", a.sliding_window
        if a.global_every:
            config["layer_types"] = ["full_attention" if (i + 1) % a.global_every == 0 else "sliding_attention"
                                     for i in range(n_layer)]
    if a.rope_parameters:  # as transformers 5 writes it: RoPE in one object, per layer type where the bases differ
        params = {"rope_type": "default", "rope_theta": config.pop("rope_theta")} | config.pop("rope_scaling", {})
        if arch == "gemma3":
            local = {"rope_type": "default", "rope_theta": config.pop("rope_local_base_freq")}
            params = {"full_attention": params, "sliding_attention": local}
        config["rope_parameters"] = params
    if a.multimodal:
        if arch != "gemma3":
            raise SystemExit("--multimodal: Gemma 3 only")
        text = {key: v for key, v in config.items()
                if key not in ("architectures", "torch_dtype", "tie_word_embeddings") and GEMMA3_TEXT_DEFAULTS.get(key, ...) != v}
        config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text,
                  "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8}, "mm_tokens_per_image": 256,
                  "torch_dtype": config["torch_dtype"]}
    (out / "config.json").write_text(json.dumps(config, indent=2))

    hf: list[tuple[str, np.ndarray, str]] = [("model.embed_tokens.weight", embd, embd_dtype)]
    add = lambda hf_name, gguf_name, fix=None: hf.append(
        (hf_name, *(lambda x, d: ((fix(x) if fix else x), d))(*tensor(r, gguf_name))))
    # Gemma's RMS norms scale by 1 + w; its GGUF files hold the sum.
    add_norm = lambda hf_name, gguf_name: add(hf_name, gguf_name, (lambda x: x - 1) if gemma else None)
    add_norm("model.norm.weight", "output_norm.weight")
    if "output.weight" in names:
        add("lm_head.weight", "output.weight")
    neox = arch != "llama"
    for i in range(n_layer):
        g, h = f"blk.{i}.", f"model.layers.{i}."
        add_norm(h + "input_layernorm.weight", g + "attn_norm.weight")
        if gemma:  # post_attention_layernorm: Gemma's norm of the attention's output, llama's of the FFN's input
            add_norm(h + "post_attention_layernorm.weight", g + "post_attention_norm.weight")
            add_norm(h + "pre_feedforward_layernorm.weight", g + "ffn_norm.weight")
            add_norm(h + "post_feedforward_layernorm.weight", g + "post_ffw_norm.weight")
        else:
            add(h + "post_attention_layernorm.weight", g + "ffn_norm.weight")
        if f"{g}attn_q_norm.weight" in names:  # Gemma 3, Qwen3
            add_norm(h + "self_attn.q_norm.weight", g + "attn_q_norm.weight")
            add_norm(h + "self_attn.k_norm.weight", g + "attn_k_norm.weight")
        if arch == "phi3":  # Q, K and V in one tensor, as in the GGUF file
            add(h + "self_attn.qkv_proj.weight", g + "attn_qkv.weight")
        else:
            add(h + "self_attn.q_proj.weight", g + "attn_q.weight", None if neox else lambda x: unpermute(x, n_head))
            add(h + "self_attn.k_proj.weight", g + "attn_k.weight", None if neox else lambda x: unpermute(x, n_head_kv))
            add(h + "self_attn.v_proj.weight", g + "attn_v.weight")
        add(h + "self_attn.o_proj.weight", g + "attn_output.weight")
        for b in ("q", "k", "v"):
            if f"{g}attn_{b}.bias" in names:
                add(f"{h}self_attn.{b}_proj.bias", f"{g}attn_{b}.bias")
        if n_expert:  # Mixtral's names, or Qwen3-MoE's
            moe, names3 = ("mlp", ("gate_proj", "up_proj", "down_proj")) if arch == "qwen3moe" else \
                ("block_sparse_moe", ("w1", "w3", "w2"))
            add(f"{h}{moe}.gate.weight", g + "ffn_gate_inp.weight")
            for gguf_name, w in zip(("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"), names3):
                x, d = tensor(r, g + gguf_name + ".weight")
                for e in range(n_expert):
                    hf.append((f"{h}{moe}.experts.{e}.{w}.weight", np.ascontiguousarray(x[e]), d))
        elif arch == "phi3":  # gate rows then up rows, as in the GGUF file's ffn_up
            add(h + "mlp.gate_up_proj.weight", g + "ffn_up.weight")
            add(h + "mlp.down_proj.weight", g + "ffn_down.weight")
        else:
            add(h + "mlp.gate_proj.weight", g + "ffn_gate.weight")
            add(h + "mlp.up_proj.weight", g + "ffn_up.weight")
            add(h + "mlp.down_proj.weight", g + "ffn_down.weight")
    if a.multimodal:
        root = {"old": "language_model.model.", "new": "model.language_model."}[a.multimodal]
        hf = [(root + name[len("model."):], x, d) for name, x, d in hf]
        vision = "vision_tower.vision_model.post_layernorm.weight"
        hf.append(((vision if a.multimodal == "old" else "model." + vision), np.ones(8, np.float32), "F32"))

    if a.shards <= 1:
        write_safetensors(out / "model.safetensors", hf)
        return 0
    per = -(-len(hf) // a.shards)
    weight_map = {}
    for s in range(a.shards):
        fname = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
        part = hf[s * per:(s + 1) * per]
        write_safetensors(out / fname, part)
        weight_map.update({name: fname for name, _, _ in part})
    index = {"metadata": {"total_size": sum(x.size * (4 if d == "F32" else 2) for _, x, d in hf)}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
