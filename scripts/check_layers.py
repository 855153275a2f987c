#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fails when a source file includes a header of a layer it may not use.

The layers, lowest first, and the folders each owns; a layer may include its
own headers and those of the layers it names (and theirs, transitively).
docs/ARCHITECTURE.md draws the same arrows; the CMake targets of the same
names link along them. Run: scripts/check_layers.py [ROOT]
"""
import re
import sys
from pathlib import Path

LAYERS = {  # name: (folders or files, layers it uses directly)
    "base": (["core/error.h", "core/util/"], []),
    "formats": (["core/gguf/", "core/safetensors/"], ["base"]),
    "text": (["core/tokenizer/"], ["formats"]),
    "chat": (["core/chat/"], ["base"]),  # a leaf: the engine never links it
    "weights": (["quant/"], ["formats"]),
    "model": (["core/model/", "core/models/", "core/graph/"], ["weights", "text"]),
    "backend": (["core/backend/"], ["model"]),
    "cpu": (["cpu/"], ["backend"]),
    "gpu": (["gpu/", "shaders/"], ["backend"]),
    "grammar": (["core/grammar/"], ["text"]),  # output held to a grammar (JSON, JSON Schema)
    "runtime": (["core/runtime/"], ["backend", "grammar"]),
    "engine": (["core/engine/"], ["runtime", "cpu", "gpu"]),  # hands the backends to the runtime
    "gptq": (["quant/gptq/"], ["engine"]),  # the GPTQ driver and checkpoint writer
    "tools": (["tools/"], ["engine", "gptq", "chat"]),
}
# Files of no layer (tests, benchmarks) may include anything.
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_SUFFIXES = {".h", ".cpp", ".inc", ".glsl", ".comp"}


def layer_of(path: str):
    best, best_len = None, -1
    for name, (owned, _) in LAYERS.items():
        for prefix in owned:
            if (path == prefix or (prefix.endswith("/") and path.startswith(prefix))) and len(prefix) > best_len:
                best, best_len = name, len(prefix)
    return best


def reachable(name: str):
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(LAYERS[n][1])
    return seen


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    allowed = {name: reachable(name) for name in LAYERS}
    errors = []
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root).as_posix()
        if f.suffix not in SOURCE_SUFFIXES or rel.startswith(("build", ".")):
            continue
        mine = layer_of(rel)
        if mine is None:
            continue
        for line_no, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            theirs = layer_of(target)
            if theirs is None and not (f.parent / target).exists():
                if (root / target).exists():  # a project file outside every layer (tests/, bench/)
                    errors.append(f"{rel}:{line_no}: includes {target}, which belongs to no engine layer")
                continue
            if theirs is not None and theirs not in allowed[mine]:
                uses = ", ".join(sorted(allowed[mine] - {mine})) or "nothing"
                errors.append(f"{rel}:{line_no}: layer '{mine}' includes {target} of layer '{theirs}' "
                              f"(it may use: {uses}; see docs/ARCHITECTURE.md)")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check_layers: {len(errors)} forbidden include(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
