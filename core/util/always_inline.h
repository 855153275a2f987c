// SPDX-License-Identifier: MIT
// For small functions of headers that files compiled with ISA flags (AVX2,
// AVX-512, AMX) include: an out-of-line copy made there could be the one the
// linker keeps for every caller, and SIGILL a CPU without those sets.
// gcc at -O3 inlines them anyway; clang at -O2 with sanitizers did not
// (tests/python/check_isa_objects.py finds such copies).
#pragma once

#define BASALT_ALWAYS_INLINE [[gnu::always_inline]] inline
