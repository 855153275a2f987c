#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prints the CPU kernel sets this machine has, as a comma list for
# BASALT_REQUIRE_ISA, read from the kernel's CPU flags rather than from the
# engine's own detection (which is what the tests check). BASALT_ISA caps it.
set -euo pipefail
flags=" $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
isas=(scalar)
if has avx2 fma f16c bmi2; then
  isas+=(avx2)
  has avx_vnni && isas+=(avxvnni)
  if has avx512f avx512bw avx512vl avx512dq avx512_vnni; then
    isas+=(avx512)
    # AMX also needs the kernel to grant this process the tile state
    # (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); some VMs list the
    # flags and refuse it.
    if has amx_tile amx_int8 && python3 -c 'import ctypes, sys
sys.exit(ctypes.CDLL(None).syscall(158, 0x1023, 18) != 0)' 2>/dev/null; then
      isas+=(amx)
    fi
  fi
fi
# aarch64: Advanced SIMD, and SDOT (ARMv8.2's dot product) beside it.
if has asimd; then
  isas+=(neon)
  has asimddp && isas+=(dotprod)
fi
if [ -n "${BASALT_ISA:-}" ]; then
  capped=()
  for i in "${isas[@]}"; do capped+=("$i"); [ "$i" = "$BASALT_ISA" ] && break; done
  isas=("${capped[@]}")
fi
# Not an ISA of its own but a feature some AVX-512 kernels use where it is
# there (the f16 cache's bf16 dots, cpu/attention.h); BASALT_ISA=avx512 keeps it.
if [[ " ${isas[*]} " == *" avx512 "* ]] && has avx512_bf16; then isas+=(avx512bf16); fi
(IFS=,; echo "${isas[*]}")
