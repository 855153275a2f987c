# SPDX-License-Identifier: MIT
"""basalt perplexity's windowing, for Python references of it: windows of ctx
tokens starting every stride, each token after the first scored once, by the
first window that reaches it (core/runtime/perplexity.cpp)."""
from __future__ import annotations

import math
from typing import Callable, Iterator, Sequence

import numpy as np


def windows(n: int, ctx: int, stride: int) -> Iterator[tuple[int, int, int]]:
    """(begin, end, first): the windows [begin, end) that score something, and
    the first position p whose prediction of token p + 1 each one scores."""
    scored_to, begin = 1, 0
    while scored_to < n:
        end = min(n, begin + ctx)
        if end > scored_to:
            yield begin, end, max(begin, scored_to - 1)
            scored_to = end
        begin += stride


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def perplexity(tokens: Sequence[int], ctx: int, stride: int,
               logits_of: Callable[[Sequence[int]], np.ndarray]) -> tuple[float, int]:
    """(perplexity, tokens scored); logits_of(window) gives one row of logits per window token."""
    nll, scored = 0.0, 0
    for begin, end, first in windows(len(tokens), ctx, stride):
        lp = log_softmax(logits_of(tokens[begin:end]))
        for p in range(first, end - 1):
            nll -= lp[p - begin, tokens[p + 1]]
            scored += 1
    return math.exp(nll / scored), scored


def kl_divergence(tokens: Sequence[int], ctx: int, stride: int, base_logits_of: Callable[[Sequence[int]], np.ndarray],
                  logits_of: Callable[[Sequence[int]], np.ndarray]) -> tuple[np.ndarray, float, float]:
    """basalt perplexity --kl-base's figures: KL(base || this) at every scored
    token (natural log), the share of them where both rank the same token
    first, and this one's perplexity."""
    kl, same, nll = [], 0, 0.0
    for begin, end, first in windows(len(tokens), ctx, stride):
        w = tokens[begin:end]
        lb = log_softmax(base_logits_of(w))[first - begin:end - 1 - begin]
        lt = log_softmax(logits_of(w))[first - begin:end - 1 - begin]
        kl.append((np.exp(lb) * (lb - lt)).sum(axis=-1))
        same += int((lb.argmax(axis=-1) == lt.argmax(axis=-1)).sum())
        nll -= lt[np.arange(len(lt)), np.asarray(w[first - begin + 1:])].sum()
    kl = np.concatenate(kl)
    return kl, same / len(kl), math.exp(nll / len(kl))
