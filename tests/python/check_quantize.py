#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""basalt quantize: the checkpoints it writes are standard GPTQ and hold what basalt then runs.

    check_quantize.py --dump-logits BIN --case NAME     (one of --list)
    check_quantize.py --list

Each case makes a synthetic model (make_model.py; an HF folder of it with
make_hf_folder.py where the case says so), quantizes it with `basalt quantize`
(calibration: a slice of the GPL-3 text Debian ships), and checks:
1. the folder: config.json's quantization_config and quantize_config.json say
   what was asked; the tokenizer files are copied (HF input) or, from a GGUF,
   written so that HF's tokenizers library gives llama.cpp's ids (the
   committed reference tests/data/tokenizer/smollm2.json);
2. every quantized layer as basalt loads it (basalt-dump-logits --weight)
   equals, bit for bit, check_gptq.py's numpy dequantization of the written
   qweight, qzeros, scales and g_idx (so any GPTQ loader reads basalt's weights);
3. the model's logits against the original's, on calibration-like text: within
   a bound for 8 bits (ties Q/K row order, biases and wiring to the original),
   and, for GPTQ cases, closer than round-to-nearest on the same grid.
The `errors` case runs bad command lines and wants a clear error each. The
`lossless_*` cases check that a GPTQ sym g32 checkpoint and the Q4_0 (4 bits)
or Q8_0 (8 bits) GGUF made from its bytes (the same weights, exactly) give the
same greedy text and the same logits to within float summation order.
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
from check_gptq import dequantize, unpack  # noqa: E402
from make_gptq import read_safetensors  # noqa: E402

CALIB = Path("/usr/share/common-licenses/GPL-3")
MODEL = ["--n-embd", "256", "--n-ff", "384", "--n-head", "4", "--n-head-kv", "2", "--n-layer", "2", "--vocab", "smollm2"]
CALIB_OPTS = ["--samples", "6", "--seq-len", "96"]
_GEMMA3 = ["--arch", "gemma3", "--type", "f32", "--tied", "--window", "16", "--swa-period", "2", "--rope-theta", "1000000"]
# name -> (make_model.py options, source "gguf" or "hf", basalt quantize options, 8-bit logits bound or None)
CASES = {
    "gguf_gptq4_g32_sym": (["--arch", "llama", "--type", "f32"], "gguf", ["--bits", "4", "--group-size", "32"], None),
    "gguf_rtn8_g128": (["--arch", "llama", "--type", "q8_0"], "gguf", ["--method", "rtn", "--bits", "8"], 0.03),
    "hf_gptq4_g64_act_order_asym": (["--arch", "llama", "--type", "f16"], "hf",
                                    ["--bits", "4", "--group-size", "64", "--act-order", "--asym"], None),
    "mixtral_gptq4_g64_experts": (["--arch", "llama", "--type", "f32", "--experts", "4", "--experts-used", "2"], "gguf",
                                  ["--bits", "4", "--group-size", "64"], None),
    "qwen3moe_gptq4_g32_experts": (["--arch", "qwen3moe", "--type", "f32", "--n-ff", "64", "--experts", "4",
                                    "--experts-used", "2", "--head-dim", "32"], "gguf", ["--bits", "4", "--group-size", "32"],
                                   None),
    "qwen2_gptq8_per_row_bias": (["--arch", "qwen2", "--type", "f32"], "gguf", ["--bits", "8", "--group-size", "-1"], 0.03),
    # Gemma 3: Q/K and post norms (written as HF's w for the engine's 1 + w), local and global layers
    "gemma3_gptq8_g64": (_GEMMA3, "gguf", ["--bits", "8", "--group-size", "64"], 0.03),
    "gemma3_hf_gptq4_g64_asym": (_GEMMA3, "hf", ["--bits", "4", "--group-size", "64", "--asym"], None),
    # Gemma 2: its soft-caps written back (small ones, so that they bend the logits)
    "gemma2_gptq8_g64": (["--arch", "gemma2", "--type", "f32", "--tied", "--window", "16", "--attn-softcap", "5",
                          "--final-softcap", "8"], "gguf", ["--bits", "8", "--group-size", "64"], 0.03),
    # Phi-3: Q/K/V and gate/up written as one layer each (qkv_proj, gate_up_proj); LongRoPE and partial
    # rotary (Phi-4-mini's 3/4) written back into config.json from a GGUF file
    "phi3_gptq4_g32_act_order_partial_longrope": (["--arch", "phi3", "--type", "f32", "--rope-dim", "48", "--longrope", "64"],
                                                  "gguf", ["--bits", "4", "--group-size", "32", "--act-order"], None),
    "phi3_hf_rtn8_g64_asym": (["--arch", "phi3", "--type", "f16", "--longrope", "64"], "hf",
                              ["--method", "rtn", "--bits", "8", "--group-size", "64", "--asym"], 0.03),
    # RoPE scaling from a GGUF file written back into config.json: Llama 3.1's llama3 type (the file holds only
    # its per-pair factors: the parameters are solved for) and YaRN (round-to-nearest: the config is the point)
    "llama3_rope_rtn8_g64": (["--arch", "llama", "--type", "f32", "--rope-llama3", "8:1:4:64"], "gguf",
                             ["--method", "rtn", "--bits", "8", "--group-size", "64"], 0.03),
    "yarn_rtn8_g64": (["--arch", "qwen2", "--type", "f32", "--rope-yarn", "4:64"], "gguf",
                      ["--method", "rtn", "--bits", "8", "--group-size", "64"], 0.03),
    "errors": ([], "", [], None),
    "lossless_gptq4_sym_g32_vs_q4_0": ([], "", ["--bits", "4"], None),
    "lossless_gptq8_sym_g32_vs_q8_0": ([], "", ["--bits", "8"], None),
}


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


def logits(dump: str, model: Path, tokens: list[int], out: Path, n_vocab: int) -> np.ndarray:
    run([dump, str(model), str(out), *map(str, tokens)])
    return np.fromfile(out, dtype="<f4").reshape(len(tokens), n_vocab)


def rel_rms(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.sqrt(np.mean((got - ref) ** 2)) / np.sqrt(np.mean(ref ** 2)))


def check_errors(basalt: str, tmp: Path) -> bool:
    """Bad command lines: a non-zero exit and a message naming the problem, nothing written."""
    model = tmp / "m.gguf"
    cfg = make_model.parse_config(MODEL + ["--type", "f32"])
    make_model.write_model(model, cfg)
    (tmp / "exists").mkdir()
    (tmp / "bad.txt").write_bytes(b"caf\xc3 \xff\xfe not UTF-8")
    (tmp / "short.txt").write_text("too short")
    gptq_dir = tmp / "gptq"
    subprocess.run([basalt, "quantize", str(model), str(gptq_dir), "--method", "rtn"], check=True, capture_output=True)
    cases = [
        (["quantize", str(model), str(tmp / "exists"), "--method", "rtn"], "exists already"),
        (["quantize", str(model), str(tmp / "o1")], "--calib"),
        (["quantize", str(model), str(tmp / "o2"), "--calib", str(tmp / "bad.txt")], "not valid UTF-8"),
        (["quantize", str(model), str(tmp / "o3"), "--calib", str(tmp / "short.txt")], "too little calibration text"),
        (["quantize", str(model), str(tmp / "o4"), "--calib", str(tmp / "missing.txt")], "cannot read"),
        (["quantize", str(model), str(tmp / "o5"), "--method", "rtn", "--group-size", "48"], "multiple of 32"),
        (["quantize", str(model), str(tmp / "o6"), "--method", "rtn", "--act-order"], "--method gptq"),
        (["quantize", str(model), str(tmp / "o7"), "--bits", "3", "--method", "rtn"], "bits"),
        (["quantize", str(gptq_dir), str(tmp / "o8"), "--method", "rtn"], "GPTQ-quantized already"),
        (["quantize", str(tmp / "nothing.gguf"), str(tmp / "o9"), "--method", "rtn"], "nothing.gguf"),
    ]
    ok = True
    for args, want in cases:
        r = subprocess.run([basalt, *args], capture_output=True, text=True)
        out = Path(args[2])
        good = r.returncode != 0 and want in r.stderr and (args[2].endswith("exists") or not out.exists())
        print(f"{' '.join(args[3:]) or '(no options)'}: exit {r.returncode}, {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''!r}"
              f" -> {'ok' if good else 'WRONG (want ' + repr(want) + ')'}")
        ok = ok and good
    return ok


def to_ggml_blocks(tensors: dict, prefix: str, bits: int, n_head: int) -> tuple:
    """A GPTQ sym g32 layer as Q4_0 / Q8_0 blocks: same scales, same integers (q - 2^(bits-1))."""
    q = unpack(tensors[prefix + ".qweight"][0].astype(np.int64), bits, 0).T       # [out][in]
    s = tensors[prefix + ".scales"][0].astype(np.float16).T                        # [out][groups]
    if n_head:  # HF rotate-half rows back to GGUF llama's interleaved pairs
        q = q.reshape(n_head, 2, -1, q.shape[1]).swapaxes(1, 2).reshape(q.shape)
        s = s.reshape(n_head, 2, -1, s.shape[1]).swapaxes(1, 2).reshape(s.shape)
    n_out, n_in = q.shape
    q = q.reshape(n_out, n_in // 32, 32)
    d = s.reshape(n_out, n_in // 32, 1).view(np.uint8)                             # f16 bytes
    if bits == 4:
        body = (q[:, :, :16] | (q[:, :, 16:] << 4)).astype(np.uint8)
        return make_model.QT.Q4_0, np.concatenate([d, body], axis=2).reshape(n_out, -1)
    body = (q - 128).astype(np.int8).view(np.uint8)
    return make_model.QT.Q8_0, np.concatenate([d, body], axis=2).reshape(n_out, -1)


def check_lossless(basalt: str, dump: str, bits: int, t: Path) -> bool:
    cfg = make_model.parse_config(MODEL + ["--arch", "llama", "--type", "f32"])
    make_model.write_model(t / "m.gguf", cfg)
    calib = t / "calib.txt"
    calib.write_text(CALIB.read_text()[:12000])
    run([basalt, "quantize", str(t / "m.gguf"), str(t / "gptq"), "--calib", str(calib), *CALIB_OPTS,
         "--bits", str(bits), "--group-size", "32"])
    tensors = read_safetensors(t / "gptq" / "model.safetensors")
    names = {"self_attn.q_proj": ("attn_q", cfg.n_head), "self_attn.k_proj": ("attn_k", cfg.n_head_kv),
             "self_attn.v_proj": ("attn_v", 0), "self_attn.o_proj": ("attn_output", 0), "mlp.gate_proj": ("ffn_gate", 0),
             "mlp.up_proj": ("ffn_up", 0), "mlp.down_proj": ("ffn_down", 0)}
    raw = {}
    for i in range(cfg.n_layer):
        for hf, (gg, heads) in names.items():
            raw[f"blk.{i}.{gg}.weight"] = to_ggml_blocks(tensors, f"model.layers.{i}.{hf}", bits, heads)
    make_model.write_model(t / "q.gguf", cfg, raw)
    prompt = "Everyone is permitted to copy and distribute verbatim copies"
    texts = [run([basalt, "run", "-m", str(m), "-p", prompt, "-n", "32", "--temp", "0"]).stdout
             for m in (t / "gptq", t / "q.gguf")]
    same_text = texts[0] == texts[1]
    print(f"greedy text, GPTQ folder vs {'Q4_0' if bits == 4 else 'Q8_0'} GGUF: {'same' if same_text else 'DIFFERENT'}\n"
          f"  {texts[0]!r}\n  {texts[1]!r}")
    n_vocab = int(json.loads((t / "gptq" / "config.json").read_text())["vocab_size"])
    tokens = [1, 7, 42, 99, 3, 250, 17, 8, 300, 64, 5, 128, 77, 2, 19, 400]
    a, b = (logits(dump, m, tokens, t / "l.f32", n_vocab) for m in (t / "gptq", t / "q.gguf"))
    rel = rel_rms(a, b)
    print(f"logits, relative RMS difference {rel:.2e} (bound 1e-5: float summation order only)")
    return same_text and rel <= 1e-5


def main() -> int:
    a = parse_case_args(__doc__, CASES)
    if a is None:
        return 0
    basalt = str(Path(a.dump_logits).parent / "basalt")
    model_opts, source, opts, bound = CASES[a.case]
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        if a.case == "errors" or a.case.startswith("lossless"):
            ok = check_errors(basalt, t) if a.case == "errors" else check_lossless(basalt, a.dump_logits, int(opts[1]), t)
            print("PASS" if ok else "FAIL")
            return 0 if ok else 1
        cfg = make_model.parse_config(MODEL + model_opts)
        make_model.check_config(cfg)
        make_model.write_model(t / "m.gguf", cfg)
        src = t / "m.gguf"
        if source == "hf":
            run([sys.executable, str(HERE / "make_hf_folder.py"), str(src), str(t / "hf")])
            src = t / "hf"
        calib = t / "calib.txt"
        calib.write_text(CALIB.read_text()[:12000])
        outs = {}
        methods = ["gptq", "rtn"] if "rtn" not in opts else ["rtn"]
        for method in methods:
            extra = [o for o in opts if o != "--act-order"] if method == "rtn" and "--act-order" in opts else opts
            if "--method" not in extra:
                extra = ["--method", method, *extra]
            out = t / method
            run([basalt, "quantize", str(src), str(out), "--calib", str(calib), *CALIB_OPTS, *extra])
            outs[method] = out
        ok = True

        # 1. The folder.
        main_out = outs[methods[0]]
        qc = json.loads((main_out / "config.json").read_text())["quantization_config"]
        bits = int(opts[opts.index("--bits") + 1])
        group = int(opts[opts.index("--group-size") + 1]) if "--group-size" in opts else 128
        want = {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": "--act-order" in opts,
                "sym": "--asym" not in opts, "checkpoint_format": "gptq_v2" if "--asym" in opts else "gptq"}
        got = {k: qc.get(k) for k in want}
        rope = json.loads((main_out / "config.json").read_text()).get("rope_scaling") or {}
        rope_type = "llama3" if cfg.rope_llama3 else "yarn" if cfg.rope_yarn else "longrope" if cfg.longrope else None
        print(f"rope_scaling type {rope.get('rope_type', rope.get('type'))}: {'ok' if rope.get('rope_type', rope.get('type')) == rope_type else 'WRONG, want ' + str(rope_type)}")
        ok = ok and rope.get("rope_type", rope.get("type")) == rope_type
        same_qc = json.loads((main_out / "quantize_config.json").read_text()) == qc
        print(f"quantization_config {got}: {'ok' if got == want and same_qc else 'WRONG, want ' + str(want)}")
        ok = ok and got == want and same_qc
        text = calib.read_text()[2000:2600]
        if source == "hf":
            for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
                copied = (main_out / f).read_bytes() == (src / f).read_bytes()
                print(f"{f} copied: {'yes' if copied else 'NO'}")
                ok = ok and copied
        else:  # the written tokenizer.json in HF's tokenizers gives llama.cpp's ids (tests/data/tokenizer/smollm2.json)
            from tokenizers import Tokenizer
            tok = Tokenizer.from_file(str(main_out / "tokenizer.json"))
            specials = [t["content"] for t in json.loads((main_out / "tokenizer.json").read_text())["added_tokens"]]
            refs = json.loads((HERE.parent / "data" / "tokenizer" / "smollm2.json").read_text())["cases"]
            cases = [c for c in refs if not c["add_special"] and (c["parse_special"] or not any(x in c["text"] for x in specials))]
            wrong = [c["text"] for c in cases if tok.encode(c["text"], add_special_tokens=False).ids != c["ids"]]
            print(f"written tokenizer.json, HF tokenizers vs llama.cpp on {len(cases)} strings: {len(wrong)} differ {wrong[:3]}")
            ok = ok and not wrong and len(cases) > 100
        from tokenizers import Tokenizer
        tokens = Tokenizer.from_file(str(main_out / "tokenizer.json")).encode(text, add_special_tokens=False).ids[:48]

        # 2. Every layer, bit for bit.
        for method, out in outs.items():
            tensors = read_safetensors(out / "model.safetensors")
            prefixes = sorted(n.removesuffix(".qweight") for n in tensors if n.endswith(".qweight"))
            dense_layers = 4 if cfg.arch == "phi3" else 7  # Phi-3: qkv_proj, o_proj, gate_up_proj, down_proj
            exact = len(prefixes) == (4 + 3 * cfg.n_expert if cfg.n_expert else dense_layers) * cfg.n_layer
            for prefix in prefixes:
                ref = dequantize(tensors, prefix, bits, "--asym" in opts)
                # Experts ...experts.E.w1 (Qwen3-MoE: .gate_proj) are rows [E * out, (E + 1) * out) of basalt's stacked ...experts.w1.
                m = re.fullmatch(r"(.*\.experts)\.(\d+)\.(w[123]|(?:gate|up|down)_proj)", prefix)
                name, e = (f"{m[1]}.{m[3]}", int(m[2])) if m else (prefix, 0)
                run([a.dump_logits, str(out), str(t / "w.f32"), "--weight", name])
                w = np.fromfile(t / "w.f32", dtype="<f4").reshape(-1, ref.shape[1])[e * ref.shape[0]:(e + 1) * ref.shape[0]]
                if not np.array_equal(w.view(np.uint32), ref.view(np.uint32)):
                    print(f"{method} {prefix}: {int(np.sum(w.view(np.uint32) != ref.view(np.uint32)))} weights differ")
                    exact = False
            print(f"{method}: {len(prefixes)} GPTQ layers, numpy dequantization == basalt's weights: {'yes' if exact else 'NO'}")
            ok = ok and exact

        # 3. Logits against the original model.
        n_vocab = int(json.loads((main_out / "config.json").read_text())["vocab_size"])
        ref = logits(a.dump_logits, src, tokens, t / "l.f32", n_vocab)
        err = {m: rel_rms(logits(a.dump_logits, out, tokens, t / "l.f32", n_vocab), ref) for m, out in outs.items()}
        print("logits against the original, relative RMS: " + ", ".join(f"{m} {e:.3e}" for m, e in err.items()))
        if bound is not None:
            print(f"  bound {bound}: {'ok' if err[methods[0]] <= bound else 'EXCEEDED'}")
            ok = ok and err[methods[0]] <= bound
        if "gptq" in err and "rtn" in err:
            print(f"  gptq below rtn: {'yes' if err['gptq'] < err['rtn'] else 'NO'}")
            ok = ok and err["gptq"] < err["rtn"]
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
