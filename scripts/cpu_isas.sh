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
if [ -n "${BASALT_ISA:-}" ]; then
  capped=()
  for i in "${isas[@]}"; do capped+=("$i"); [ "$i" = "$BASALT_ISA" ] && break; done
  isas=("${capped[@]}")
fi
(IFS=,; echo "${isas[*]}")
