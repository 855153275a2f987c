#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Checks basalt's GPTQ checkpoints against GPTQModel, both ways. Not run in CI.
"""GPTQ checkpoints between basalt and GPTQModel, both ways.

    validate_gptq_gptqmodel.py [--cases NAME,NAME]

Needs GPTQModel (with torch and transformers), which the test suite does not
install: `python3 -m venv /tmp/tvenv && /tmp/tvenv/bin/pip install torch
transformers gptqmodel numpy safetensors gguf`, then run this with that Python
from a built tree (GPTQMODEL_CPU_WORKERS=2 on a 2-core machine).

"made by gptqmodel" cases quantize a synthetic model's HF folder with
GPTQModel (its GPTQ, calibration on the GPL-3 text) and run the checkpoint in
basalt; "made by basalt" cases run `basalt quantize` and load the result in
GPTQModel. Either way the logits of GPTQModel's reference kernel (TorchLinear,
bf16) and basalt's (int8 activations) must agree within 3% relative RMS, at
least 14 of 16 argmax equal (bf16 and int8 rounding apart, the weights are
the same: check_gptq.py holds basalt to numpy's dequantization bit for bit).
GPTQModel's TorchFusedLinear (its automatic CPU choice) is not used: in
GPTQModel 7.7 its forward disagrees with its own dequantize_weight() on
asymmetric checkpoints (1.48 max difference on outputs of 3.2).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BIN = ROOT / "build" / "bin"
TOKENS = [1, 7, 42, 99, 3, 250, 17, 8, 300, 64, 5, 128, 77, 2, 19, 400]
_LLAMA = ["--arch", "llama", "--type", "f32", "--n-embd", "256", "--n-ff", "512", "--n-head", "4", "--n-head-kv", "2",
          "--n-layer", "2"]
_GEMMA3 = ["--arch", "gemma3", "--type", "f32", "--n-embd", "128", "--n-ff", "256", "--n-layer", "2", "--tied", "--window", "8",
           "--swa-period", "2"]
# name -> (make_model.py options, who quantizes, (bits, group size, sym, act-order))
CASES = {
    "gptqmodel_llama_g32_asym_act_order": (_LLAMA, "gptqmodel", (4, 32, False, True)),
    "gptqmodel_llama_g128_sym": (_LLAMA, "gptqmodel", (4, 128, True, False)),
    "gptqmodel_gemma3_g32_asym_act_order": (_GEMMA3, "gptqmodel", (4, 32, False, True)),
    "basalt_llama_g32_asym_act_order": (_LLAMA, "basalt", (4, 32, False, True)),
    "basalt_llama_g128_sym": (_LLAMA, "basalt", (4, 128, True, False)),
    "basalt_gemma3_g32_asym": (_GEMMA3, "basalt", (4, 32, False, False)),
}


def calibration() -> list[str]:
    text = Path("/usr/share/common-licenses/GPL-3").read_text()
    return [text[i:i + 600] for i in range(0, 12000, 600)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", help="comma-separated case names (default: all)")
    a = p.parse_args()
    import torch
    from gptqmodel import BACKEND, GPTQModel, QuantizeConfig

    failures = 0
    for name in a.cases.split(",") if a.cases else CASES:
        model_opts, maker, (bits, group, sym, act_order) = CASES[name]
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            subprocess.run([sys.executable, str(HERE / "make_model.py"), str(t / "m.gguf"), *model_opts], check=True)
            if maker == "gptqmodel":
                subprocess.run([sys.executable, str(HERE / "make_hf_folder.py"), str(t / "m.gguf"), str(t / "hf")], check=True)
                cfg = QuantizeConfig(bits=bits, group_size=group, desc_act=act_order, sym=sym)
                cwd = os.getcwd()
                os.chdir(t)  # GPTQModel writes its logs/ into the working directory
                q = GPTQModel.load(str(t / "hf"), cfg, device="cpu")
                q.quantize(calibration(), batch_size=1)
                q.save(str(t / "q"))
                del q
                os.chdir(cwd)
            else:
                (t / "calib.txt").write_text("".join(calibration()))
                options = ["--bits", str(bits), "--group-size", str(group), "--calib", str(t / "calib.txt"), "--samples", "6",
                           "--seq-len", "96", *([] if sym else ["--asym"]), *(["--act-order"] if act_order else [])]
                subprocess.run([str(BIN / "basalt"), "quantize", str(t / "m.gguf"), str(t / "q"), *options], check=True,
                               capture_output=True)
            model = GPTQModel.load(str(t / "q"), device="cpu", dtype=torch.bfloat16, backend=BACKEND.TORCH).model
            with torch.no_grad():
                ref = model(torch.tensor([TOKENS])).logits[0].float().numpy()
            subprocess.run([str(BIN / "basalt-dump-logits"), str(t / "q"), str(t / "l.f32"), *map(str, TOKENS)], check=True,
                           capture_output=True, env={**os.environ, "BASALT_ATTENTION_BF16": "0"})
            got = np.fromfile(t / "l.f32", dtype="<f4").reshape(len(TOKENS), -1)
        rel = float(np.sqrt(np.mean((got - ref) ** 2)) / np.sqrt(np.mean(ref ** 2)))
        same = int(np.sum(got.argmax(1) == ref.argmax(1)))
        good = rel <= 3e-2 and same >= 14
        failures += not good
        print(f"{name:40} relative RMS {rel:.2e}  argmax {same}/{len(TOKENS)}  {'ok' if good else 'DIFFERENT'}", flush=True)
    print("PASS" if failures == 0 else f"FAIL ({failures})")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
