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
    # Linux lists the AMX flags only where it manages the tile state.
    has amx_tile amx_int8 && isas+=(amx)
  fi
fi
if [ -n "${BASALT_ISA:-}" ]; then
  capped=()
  for i in "${isas[@]}"; do capped+=("$i"); [ "$i" = "$BASALT_ISA" ] && break; done
  isas=("${capped[@]}")
fi
(IFS=,; echo "${isas[*]}")
