#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""basalt perplexity against the numpy reference forward pass.

    check_perplexity.py --basalt BIN

A synthetic f32 model (make_model.py, tiny byte-level BPE vocabulary) scores
the first 1500 bytes of README.md with windows of 64 tokens every 24. The
text is tokenized here by HF's tokenizers library from the model's vocabulary
written as tokenizer.json (make_hf_folder.py; tests/python/check_hf_tokenizer.py
shows those files tokenize as llama.cpp does), and the reference perplexity
comes from reference_forward.py over the same windows. They must agree to
1e-4 relative (f32 weights: the engine's logits differ from the float64
reference only by float32 rounding and its f16 KV cache), on the same count of
tokens.

Then --kl-base: the q8 cache against the f16 one in the same process. Its
perplexity must match the reference that rounds K and V as the q8 cache and
the attention kernels do (the JSON names what they round), its base's must
equal the plain f16 run's, and its KL divergence the reference's: the mean
within 5% (the f16 cache's own rounding, which the reference leaves out,
is part of what the engine measures: 0.5% here), the share of same top tokens within
1%. The f16 cache against itself must give a KL of 0 (1e-9 at most).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_model  # noqa: E402
import perplexity_windows  # noqa: E402
import reference_forward  # noqa: E402

CTX, STRIDE = 64, 24


def run(basalt: str, model: Path, text: Path, *flags: str) -> dict:
    out = subprocess.run([basalt, "perplexity", "-m", str(model), "-f", str(text), "--ctx", str(CTX), "--stride", str(STRIDE),
                          "--json", *flags], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--basalt", required=True)
    a = p.parse_args()
    from tokenizers import Tokenizer  # scripts/install-deps.sh installs it

    text = (HERE.parents[1] / "README.md").read_bytes()[:1500].decode("utf-8", errors="ignore")
    ok = True

    def check(cond: bool, what: str) -> None:
        nonlocal ok
        print(("ok   " if cond else "FAIL ") + what)
        ok = ok and cond

    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        cfg = make_model.parse_config(["--type", "f32", "--n-ctx", "256"])
        make_model.write_model(t / "m.gguf", cfg)
        (t / "text.txt").write_text(text)
        subprocess.run([sys.executable, str(HERE / "make_hf_folder.py"), str(t / "m.gguf"), str(t / "tok"), "--vocab-only"],
                       check=True)
        tokens = Tokenizer.from_file(str(t / "tok" / "tokenizer.json")).encode(text, add_special_tokens=False).ids
        model = reference_forward.Model(str(t / "m.gguf"))

        def reference(kv_type: str, dots: str):
            return lambda w: reference_forward.forward_model(model, w, kv_type=kv_type, dots=dots)

        f16 = run(a.basalt, t / "m.gguf", t / "text.txt")
        want, scored = perplexity_windows.perplexity(tokens, CTX, STRIDE, reference("f16", f16["attention_dots"]))
        rel = abs(f16["perplexity"] - want) / want
        check(f16["tokens"] == len(tokens) and f16["scored"] == scored and rel <= 1e-4,
              f"f16 cache: basalt {f16['perplexity']:.6f} over {f16['scored']} tokens; reference {want:.6f} over {scored}; "
              f"relative difference {rel:.2e}")

        same = run(a.basalt, t / "m.gguf", t / "text.txt", "--kl-base", "f16")
        # Two executors on the same batches: 0 where the kernels' sums do not depend on where their
        # buffers lie (here), within rounding where a library's might (oneDNN's alignment peeling).
        rel = abs(same["base_perplexity"] / same["perplexity"] - 1)
        check(same["kl_max"] <= 1e-9 and same["same_top"] >= 0.99 and rel <= 1e-9,
              f"f16 against f16: KL max {same['kl_max']}, same top {same['same_top']}, perplexities {rel:.1e} apart")

        q8 = run(a.basalt, t / "m.gguf", t / "text.txt", "--kv-type", "q8", "--kl-base", "f16")
        base_ref, q8_ref = reference("f16", q8["base_attention_dots"]), reference("q8", q8["attention_dots"])
        want, _ = perplexity_windows.perplexity(tokens, CTX, STRIDE, q8_ref)
        rel = abs(q8["perplexity"] - want) / want
        check(rel <= 1e-4, f"q8 cache ({q8['attention_dots']} dots): basalt {q8['perplexity']:.6f}, reference {want:.6f}, "
                           f"relative difference {rel:.2e}")
        rel = abs(q8["base_perplexity"] - f16["perplexity"]) / f16["perplexity"]
        check(rel <= 1e-9, f"its f16 base: {q8['base_perplexity']:.9f}, the f16 run's {f16['perplexity']:.9f}")
        kl, same_top, _ = perplexity_windows.kl_divergence(tokens, CTX, STRIDE, base_ref, q8_ref)
        check(len(kl) == q8["scored"] and abs(q8["kl_mean"] / kl.mean() - 1) <= 0.05 and abs(q8["same_top"] - same_top) <= 0.01,
              f"KL(f16 || q8): basalt mean {q8['kl_mean']:.3e}, same top {q8['same_top']:.4f}; "
              f"reference {kl.mean():.3e}, {same_top:.4f}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
