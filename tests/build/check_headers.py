#!/usr/bin/env python3
"""Every header compiles on its own (issue 36): a one-line C file that includes only it.

A header that needs names its includer happens to define first breaks the next file that
includes it in another order. Each header of bpf/ is compiled as the BPF program is (clang
-target bpf and the build's BPF flags); each of include/ and of every subsystem folder under
dataplane/ and control/ as the daemon is (the C compiler, the project's include paths and
defines); an include/ header that a bpf/ file includes is compiled both ways. -fsyntax-only:
nothing is written. Unused static functions and variables are not errors here (nothing uses
them in a file of one include); every other warning of the build is (-Werror).

A header that includes DPDK's headers (<rte_*.h>) needs libdpdk's flags (pkg-config): without
them it is reported as skipped, never as passed.

Usage: check_headers.py --source ROOT --cc CC [--cc-arg ARG]... [--bpf-cc CLANG
       [--bpf-cflag FLAG]...]          (without --bpf-cc: the bpf/ headers are skipped)
       check_headers.py --self-test --cc CC   (a scratch tree: a header that needs a name its
                                               includer defines must fail, the others pass)
Prints one line per header (ok, FAIL, skipped) and the first lines of each failure's errors;
exits 1 when any header fails.
"""
import argparse
import os
import re
import subprocess
import sys

HOST_ROOTS = ("include", "dataplane", "control")
NOT_ERRORS = ["-Wno-unused-function", "-Wno-unused-variable", "-Wno-unused-const-variable"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def headers(root, top):
    out = []
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs.sort()
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".h")]
    return out


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return INCLUDE_RE.findall(f.read())


def compile_alone(cmd, header):
    """(ok, first lines of the compiler's complaint)."""
    src = f'#include "{header}"\n'
    p = subprocess.run(cmd + ["-fsyntax-only", "-x", "c", "-"], input=src, text=True,
                       capture_output=True)
    return p.returncode == 0, p.stderr


def pkg_cflags(pkg):
    try:
        p = subprocess.run(["pkg-config", "--cflags", pkg], text=True, capture_output=True)
    except OSError:
        return None
    return p.stdout.split() if p.returncode == 0 else None


def self_test(cc):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        files = {
            "include/ndc/good.h":
                "#include <stddef.h>\nstatic inline size_t f(void) { return 0; }\n",
            "dataplane/x/needs.h": "static inline size_t g(void) { return 0; }\n",
            "control/y/y.h": '#include "x/needs_ok.h"\n',
            "dataplane/x/needs_ok.h": "#include <stddef.h>\nstruct s { size_t n; };\n",
        }
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        os.makedirs(os.path.join(d, "bpf"))
        p = subprocess.run([sys.executable, __file__, "--source", d, "--cc", cc],
                           capture_output=True, text=True)
        want = "do not compile alone: dataplane/x/needs.h (host)"
        if p.returncode != 1 or want not in p.stdout or "3 compile alone" not in p.stdout:
            print(p.stdout + p.stderr)
            print("check_headers self-test: FAIL (the planted header was not the one reported)")
            return 1
    print("check_headers self-test: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--source")
    ap.add_argument("--cc", required=True)
    ap.add_argument("--cc-arg", action="append", default=[])
    ap.add_argument("--bpf-cc")
    ap.add_argument("--bpf-cflag", action="append", default=[])
    a = ap.parse_args()
    if a.self_test:
        return self_test(a.cc)
    if not a.source:
        ap.error("--source is needed")
    root = os.path.abspath(a.source)

    host = [a.cc] + a.cc_arg + ["-std=gnu11", "-D_GNU_SOURCE", '-DNDC_VERSION="0"', "-Wall",
                                "-Wextra", "-Werror"] + NOT_ERRORS
    host += ["-I" + os.path.join(root, d) for d in HOST_ROOTS]
    bpf = None
    if a.bpf_cc:
        bpf = [a.bpf_cc] + [f for f in a.bpf_cflag if f not in ("-g", "-MD")] + NOT_ERRORS
    dpdk = None

    jobs = []  # (label, header, kind)
    bpf_headers = headers(root, "bpf")
    for h in bpf_headers:
        jobs.append((h, "bpf"))
    used_by_bpf = set()
    for f in bpf_headers + [os.path.join(root, "bpf", n) for n in sorted(
            os.listdir(os.path.join(root, "bpf"))) if n.endswith(".c")]:
        used_by_bpf.update(i for i in includes(f) if i.startswith("ndc/"))
    for top in HOST_ROOTS:
        for h in headers(root, top):
            jobs.append((h, "host"))
            rel = os.path.relpath(h, os.path.join(root, "include"))
            if top == "include" and rel in used_by_bpf:
                jobs.append((h, "bpf"))

    failed, skipped, passed = [], [], 0
    for h, kind in jobs:
        name = f"{os.path.relpath(h, root)} ({kind})"
        if kind == "bpf":
            if bpf is None:
                skipped.append(name)
                print(f"skipped: {name}: no BPF compiler (-Dbpf disabled)")
                continue
            cmd = bpf
        else:
            cmd = host
            if any(i.startswith("rte_") for i in includes(h)):
                if dpdk is None:
                    dpdk = pkg_cflags("libdpdk") or []
                if not dpdk:
                    skipped.append(name)
                    print(f"skipped: {name}: includes DPDK's headers, libdpdk not found")
                    continue
                cmd = host + dpdk
        ok, err = compile_alone(cmd, h)
        if ok:
            passed += 1
            print(f"ok: {name}")
        else:
            failed.append(name)
            print(f"FAIL: {name} does not compile alone:")
            for line in err.strip().split("\n")[:8]:
                print("    " + line)
    print(f"headers: {passed} compile alone, {len(failed)} do not, {len(skipped)} skipped")
    if failed:
        print("do not compile alone: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
