#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Checks reference_forward.py against llama.cpp (llama-cpp-python). Not run in CI.
"""Validate the numpy reference against llama.cpp.

    validate_reference.py [--cases NAME,NAME] [--keep DIR]
    validate_reference.py --write-bounds

--write-bounds writes tests/data/forward/llama_cpp_error.json instead: for
each CPU case, llama.cpp's NMSE with its default f16 KV cache against the
reference rounding the cache alike, as the engine is run; check_forward.py
bounds the engine by a margin over it (CI reads the file, needs no llama.cpp).

For every forward case (forward_cases.py; the real SmolLM2 included) this
builds the model, runs the same tokens through reference_forward.forward and
through llama.cpp (llama-cpp-python, logits of every position, f32 KV cache),
and prints NMSE, max |diff|, max |diff| / max |ref|, exact argmax agreement,
and the verdict check_forward would give llama.cpp in the engine's place.

llama.cpp quantizes activations (q8_0 / q8_K) for quantized weights and
rounds them to f16 / bf16 for f16 / bf16 weights, much as basalt does, so its
distance to the reference shows what bound a correct engine can meet. A
control row runs the reference with the wrong RoPE pairing, to show that the
comparison would catch such a mistake.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_forward  # noqa: E402
import forward_cases  # noqa: E402
import make_model  # noqa: E402
import reference_forward  # noqa: E402

GGML_TYPE_F32 = 0


def _no_extra_buffer_types(llama_cpp) -> None:
    # ggml's AMX / repacked weight buffers are "extra buffer types"; on a CPU
    # that reports AMX but whose OS (or sandbox) does not grant the tile
    # state, tileloadd raises SIGILL. The plain CPU kernels are what we want
    # to compare with anyway.
    low = llama_cpp.llama_cpp
    if getattr(low.llama_model_default_params, "_basalt", False):
        return
    orig = low.llama_model_default_params

    def params():
        p = orig()
        p.use_extra_bufts = False
        return p
    params._basalt = True
    low.llama_model_default_params = params


def llama_cpp_logits(path: str, tokens: list[int], f32_cache: bool = True) -> np.ndarray:
    import llama_cpp
    _no_extra_buffer_types(llama_cpp)
    cache = dict(type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32) if f32_cache else {}
    llm = llama_cpp.Llama(model_path=path, n_ctx=max(64, len(tokens)), n_batch=512,
                          logits_all=True, verbose=False, n_threads=2, **cache)
    llm.eval(tokens)
    out = np.array(llm.scores[:len(tokens)], dtype=np.float32)
    llm.close()
    return out


def stats(got: np.ndarray, ref: np.ndarray) -> dict:
    g, r = got.astype(np.float64), ref.astype(np.float64)
    err = g - r
    return {
        "nmse": float((err ** 2).sum() / (r ** 2).sum()),
        "max_abs": float(np.abs(err).max()),
        "rel": float(np.abs(err).max() / np.abs(r).max()),
        "argmax": f"{int((got.argmax(1) == ref.argmax(1)).sum())}/{len(ref)}",
    }


def case_model(case: forward_cases.Case, work: Path) -> str:
    if case.model == "default":
        return make_model.default_model_path()
    if case.model == "gemma3":
        return make_model.gemma3_model_path()
    path = str(work / f"{case.name}.gguf")
    make_model.write_model(path, make_model.parse_config(list(case.make)))
    return path


def write_bounds(cases: list[forward_cases.Case], work: Path) -> int:
    import llama_cpp
    measured = {}
    for case in cases:
        if case.base:  # a variant (GPU, q8 cache, chunks) is held to its base case's figure
            continue
        path = case_model(case, work)
        model = reference_forward.Model(path)
        tokens = list(case.tokens) or check_forward.default_tokens(model.n_vocab, case.n_tokens)
        ref = reference_forward.forward_model(model, tokens, {}, "f16")
        s = stats(llama_cpp_logits(path, tokens, f32_cache=False), ref)
        measured[case.name] = {"nmse": s["nmse"], "argmax": s["argmax"]}
        print(f"{case.name:34} NMSE {s['nmse']:9.2e} argmax {s['argmax']}", flush=True)
    out = check_forward.LLAMA_CPP_ERROR
    out.parent.mkdir(parents=True, exist_ok=True)
    # The cases not run this time (--cases) keep their figures.
    kept = json.loads(out.read_text())["cases"] if out.exists() else {}
    out.write_text(json.dumps({"llama_cpp_python": llama_cpp.__version__, "kv_cache": "f16",
                               "cases": kept | measured}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", help="comma-separated case names (default: all)")
    p.add_argument("--keep", metavar="DIR", help="keep the models in DIR")
    p.add_argument("--write-bounds", action="store_true",
                   help="write llama.cpp's error per case for check_forward.py's bounds")
    ns = p.parse_args(argv)
    cases = forward_cases.CASES
    if ns.cases:
        cases = [forward_cases.get(n) for n in ns.cases.split(",")]
    if ns.write_bounds:
        with tempfile.TemporaryDirectory(prefix="basalt_val_") as tmp:
            return write_bounds(cases, Path(ns.keep or tmp))

    print(f"{'case':34} {'class':9} {'NMSE':>9} {'bound':>7} {'max|d|':>9} "
          f"{'max|d|/max|ref|':>15} {'argmax':>7}  check_forward")
    worst_ratio: dict[str, float] = {}
    failures = 0
    with tempfile.TemporaryDirectory(prefix="basalt_val_") as tmp:
        work = Path(ns.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        for case in cases:
            path = case_model(case, work)
            model = reference_forward.Model(path)
            tokens = list(case.tokens) or check_forward.default_tokens(model.n_vocab,
                                                                       case.n_tokens)
            trace: dict = {}
            ref = reference_forward.forward_model(model, tokens, trace)
            got = llama_cpp_logits(path, tokens)
            cls, bound, _ = check_forward.bounds_for(model, None, None)
            s = stats(got, ref)
            ok, report = check_forward.evaluate(model, tokens, got, ref=ref, trace=trace)
            worst_ratio[cls] = max(worst_ratio.get(cls, 0.0), s["nmse"] / bound)
            verdict = "pass" if ok else "FAIL"
            skipped = [ln for ln in report.splitlines() if ln.startswith("skipped")]
            if skipped:    # the NMSE check_forward judged, over the positions left
                skipped.append("; " + report.splitlines()[1].split(";")[0])
            print(f"{case.name:34} {cls:9} {s['nmse']:9.2e} {bound:7.0e} {s['max_abs']:9.2e} "
                  f"{s['rel']:15.2e} {s['argmax']:>7}  {verdict} {' '.join(skipped)}", flush=True)
            if not ok:
                failures += 1
                print("    " + report.replace("\n", "\n    "))
            if case.name in ("llama_f32", "qwen2_f32"):
                # control: the other RoPE pairing must be far off
                arch = model.arch
                reference_forward.ROPE_NEOX[arch] = not reference_forward.ROPE_NEOX[arch]
                try:
                    wrong = reference_forward.forward_model(model, tokens)
                finally:
                    reference_forward.ROPE_NEOX[arch] = not reference_forward.ROPE_NEOX[arch]
                s = stats(got, wrong)
                print(f"{'  control: ' + arch + ' wrong RoPE':34} {cls:9} {s['nmse']:9.2e} "
                      f"{'':7} {s['max_abs']:9.2e} {s['rel']:15.2e} {s['argmax']:>7}",
                      flush=True)
    print("worst NMSE / bound per class: " +
          ", ".join(f"{k} {v:.2g}" for k, v in sorted(worst_ratio.items())))
    print(f"{failures} case(s) where llama.cpp itself would fail check_forward")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
