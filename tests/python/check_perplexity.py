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


def reference_ppl(model: Path, tokens: list[int]) -> tuple[float, int]:
    return perplexity_windows.perplexity(tokens, CTX, STRIDE, lambda w: reference_forward.forward(str(model), w))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--basalt", required=True)
    a = p.parse_args()
    from tokenizers import Tokenizer  # scripts/install-deps.sh installs it

    text = (HERE.parents[1] / "README.md").read_bytes()[:1500].decode("utf-8", errors="ignore")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        cfg = make_model.parse_config(["--type", "f32", "--n-ctx", "256"])
        make_model.write_model(t / "m.gguf", cfg)
        (t / "text.txt").write_text(text)
        subprocess.run([sys.executable, str(HERE / "make_hf_folder.py"), str(t / "m.gguf"), str(t / "tok"), "--vocab-only"],
                       check=True)
        tokens = Tokenizer.from_file(str(t / "tok" / "tokenizer.json")).encode(text, add_special_tokens=False).ids
        out = subprocess.run([a.basalt, "perplexity", "-m", str(t / "m.gguf"), "-f", str(t / "text.txt"), "--ctx", str(CTX),
                              "--stride", str(STRIDE), "--json"], check=True, capture_output=True, text=True)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        want, scored = reference_ppl(t / "m.gguf", tokens)
    rel = abs(got["perplexity"] - want) / want
    print(f"basalt {got['perplexity']:.6f} over {got['scored']} tokens; reference {want:.6f} over {scored}; "
          f"relative difference {rel:.2e}")
    ok = got["tokens"] == len(tokens) and got["scored"] == scored and rel <= 1e-4
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
