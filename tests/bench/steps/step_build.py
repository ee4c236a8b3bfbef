#!/usr/bin/env python3
"""Builds one per-step object of the fast path (tests/bench/steps_bench.sh, issue 35).

The product's bpf/ndc_fastpath.bpf.c and the headers a step spec (tests/bench/steps/NN_step.txt)
names are copied with its snippets by tests/planted/plant.py into a directory of their own; the
copied program is compiled there, so its quoted includes find the copies first and every other
header in bpf/ (the compiler's -I). A spec whose snippet no longer matches stops the build.

Usage: step_build.py PLANT_PY SRC_DIR SPEC WORK_DIR -- CLANG ARGS... (ARGS end in -o OUT)
"""
import os
import subprocess
import sys


def main():
    if len(sys.argv) < 7 or sys.argv[5] != "--":
        sys.stderr.write(__doc__)
        return 2
    plant_py, src, spec, work = sys.argv[1:5]
    cc = sys.argv[6:]
    os.makedirs(work, exist_ok=True)
    r = subprocess.run([sys.executable, plant_py, "--src", src, "--out", work, spec], check=False)
    if r.returncode:
        return r.returncode
    return subprocess.run(cc + ["-c", os.path.join(work, "ndc_fastpath.bpf.c")],
                          check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
