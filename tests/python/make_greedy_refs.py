#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes tests/data/greedy/smollm2.json: llama.cpp's greedy continuation (48
# tokens, argmax of its logits) of fixed prompts on the default model, with
# the gap between its two best logits at each step, so CI can compare basalt's
# choices without building llama.cpp. Rerun with llama-cpp-python installed:
# python3 tests/python/make_greedy_refs.py
import json
import subprocess
import sys
from pathlib import Path

import jinja2
import numpy as np
from llama_cpp import Llama

ROOT = Path(__file__).resolve().parents[2]
N_GEN = 48

RAW_PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    ",
    "The three primary colors are",
    "Water boils at a temperature of",
]
CHAT_PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the ocean.",
    "Explain in two sentences why the sky is blue.",
    "List three fruits that are red.",
    "Translate 'good morning' into Spanish.",
]


def render_chat(template, user):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=[{"role": "user", "content": user}],
                                            add_generation_prompt=True, bos_token="", eos_token="")


def main():
    model = subprocess.check_output([sys.executable, str(ROOT / "scripts/default_model.py")], text=True).strip()
    # use_extra_bufts=False: llama.cpp's AMX buffers fault on CPUs that report
    # AMX without the kernel enabling it (this machine kind).
    kwargs = dict(model_path=model, n_ctx=512, logits_all=True, verbose=False, n_threads=2)
    try:
        llm = Llama(**kwargs, use_extra_bufts=False)
    except TypeError:
        llm = Llama(**kwargs)
    template = llm.metadata["tokenizer.chat_template"]
    cases = []
    for kind, prompt in [("raw", p) for p in RAW_PROMPTS] + [("chat", p) for p in CHAT_PROMPTS]:
        text = render_chat(template, prompt) if kind == "chat" else prompt
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        out, margins = [], []
        for _ in range(N_GEN):
            logits = np.array(llm.scores[llm.n_tokens - 1])
            tok = int(np.argmax(logits))
            top2 = np.sort(logits)[-2:]
            out.append(tok)
            margins.append(round(float(top2[1] - top2[0]), 4))
            if tok == llm.token_eos():
                break
            llm.eval([tok])
        cases.append({"kind": kind, "prompt": prompt, "text": text, "prompt_ids": ids, "greedy_ids": out,
                      "top2_margins": margins,
                      "greedy_text": llm.detokenize(out).decode("utf-8", "replace")})
        print(kind, repr(prompt), "->", repr(cases[-1]["greedy_text"][:80]))
    out_dir = ROOT / "tests/data/greedy"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "smollm2.json").write_text(json.dumps({"model": Path(model).name, "n_gen": N_GEN, "cases": cases},
                                                     ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
