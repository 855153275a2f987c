# SPDX-License-Identifier: MIT
"""The command line of the check_*.py scripts that CMake runs one case at a time:

    SCRIPT --list                              one case name per line
    SCRIPT --dump-logits BIN --case NAME       run one case
"""
from __future__ import annotations

import argparse


def parse_case_args(doc: str, cases) -> argparse.Namespace | None:
    """The parsed options; None once --list has printed the cases."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dump-logits")
    p.add_argument("--case", choices=sorted(cases))
    p.add_argument("--list", action="store_true")
    a = p.parse_args()
    if a.list:
        print("\n".join(cases))
        return None
    if not a.dump_logits or not a.case:
        p.error("--dump-logits and --case are required")
    return a
