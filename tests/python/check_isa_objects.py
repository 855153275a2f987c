#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The objects of files built with ISA flags (*_avx2, *_avxvnni, *_avx512,
# *_amx; ARM's *_dotprod: scripts/check_arm_build.sh) must export no weak symbols outside anonymous namespaces: a weak
# symbol (an inline function or template instance) may also be made by
# baseline code, and the linker keeps one copy. If it keeps the AVX-512 one,
# the baseline caller dies with SIGILL on a CPU without AVX-512.
#
#   check_isa_objects.py OBJECT...   (the engine's and the tests' objects; others are ignored)
import re
import subprocess
import sys

ISA_FILE = re.compile(r"_(avx2|avxvnni|avx512|amx|dotprod)\.cpp\.o$")
# Data, not code: the pointer to the C++ exception personality routine that
# some builds (the sanitizers') emit weak in every object with unwinding, and
# the type descriptions clang's UBSan (-fsanitize=function) emits for the
# function types an object calls through pointers.
NOT_CODE = {"DW.ref.__gxx_personality_v0"}
NOT_CODE_PREFIXES = ("typeinfo for ", "typeinfo name for ")


def main():
    objects = [o for o in sys.argv[1:] if ISA_FILE.search(o)]
    if not objects:
        print("no ISA objects given", file=sys.stderr)
        return 1
    bad = []
    for o in objects:
        out = subprocess.run(["nm", "-C", o], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split(maxsplit=2)
            if (len(parts) == 3 and parts[1] in ("W", "V", "u") and "(anonymous namespace)" not in parts[2]
                    and parts[2] not in NOT_CODE and not parts[2].startswith(NOT_CODE_PREFIXES)):
                bad.append(f"{o}: {parts[2]}")
    print(f"{len(objects)} ISA objects checked")
    for b in bad:
        print("shared weak symbol:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
