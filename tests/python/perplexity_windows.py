# SPDX-License-Identifier: MIT
"""basalt perplexity's windowing, for Python references of it: windows of ctx
tokens starting every stride, each token after the first scored once, by the
first window that reaches it (core/runtime/perplexity.cpp)."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np


def perplexity(tokens: Sequence[int], ctx: int, stride: int,
               logits_of: Callable[[Sequence[int]], np.ndarray]) -> tuple[float, int]:
    """(perplexity, tokens scored); logits_of(window) gives one row of logits per window token."""
    nll, scored, scored_to, n, begin = 0.0, 0, 1, len(tokens), 0
    while scored_to < n:
        end = min(n, begin + ctx)
        if end > scored_to:
            logits = np.asarray(logits_of(tokens[begin:end]), dtype=np.float64)
            for p in range(max(begin, scored_to - 1), end - 1):
                row = logits[p - begin]
                mx = row.max()
                nll += mx + math.log(np.exp(row - mx).sum()) - row[tokens[p + 1]]
                scored += 1
            scored_to = end
        begin += stride
    return math.exp(nll / scored), scored
