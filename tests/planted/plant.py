#!/usr/bin/env python3
"""Writes a planted (deliberately broken) copy of product sources for the tests that must catch it.

The product keeps no planted code: a plant is a spec here, under tests/planted/, that names
product files and, for each, exact snippets to replace. Every snippet must occur exactly once in
its file, or this fails naming it: a plant whose snippet no longer matches the product (the code
moved or changed) stops the build rather than letting the planted test run the product unchanged.

Spec format (lines; '#' at the start of a line outside a snippet is a comment):
    file NAME            a file of --src copied to --out (as is, unless snippets follow)
    @@@ find             the exact text to find, up to
    @@@ replace          the text put in its place, up to
    @@@ end

Usage: plant.py --src DIR --out DIR SPEC     (--self-test: the checks on a scratch tree)
"""
import argparse
import os
import sys
import tempfile


class PlantError(Exception):
    pass


def parse(spec_path):
    """[(name, [(find, replace), ...]), ...] in the spec's order."""
    with open(spec_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    files, state, find, repl = [], None, [], []
    for n, line in enumerate(lines, 1):
        where = f"{spec_path}:{n}"
        if state is None:
            if line.startswith("#") or not line.strip():
                continue
            if line.startswith("file "):
                files.append((line[5:].strip(), []))
            elif line == "@@@ find":
                if not files:
                    raise PlantError(f"{where}: '@@@ find' before any 'file NAME'")
                state, find, repl = "find", [], []
            else:
                raise PlantError(f"{where}: expected 'file NAME' or '@@@ find', got {line!r}")
        elif state == "find":
            if line == "@@@ replace":
                state = "replace"
            elif line.startswith("@@@"):
                raise PlantError(f"{where}: expected '@@@ replace', got {line!r}")
            else:
                find.append(line)
        elif state == "replace":
            if line == "@@@ end":
                if not find:
                    raise PlantError(f"{where}: empty find snippet")
                new = "\n".join(repl) + "\n" if repl else ""
                files[-1][1].append(("\n".join(find) + "\n", new))
                state = None
            elif line.startswith("@@@"):
                raise PlantError(f"{where}: expected '@@@ end', got {line!r}")
            else:
                repl.append(line)
    if state is not None:
        raise PlantError(f"{spec_path}: snippet not closed by '@@@ end'")
    if not files:
        raise PlantError(f"{spec_path}: names no file")
    return files


def plant(src, out, spec_path):
    files = parse(spec_path)
    os.makedirs(out, exist_ok=True)
    for name, edits in files:
        if os.sep in name or name in (".", ".."):
            raise PlantError(f"{spec_path}: {name!r}: a file of --src, by its name alone")
        with open(os.path.join(src, name), encoding="utf-8") as f:
            text = f.read()
        for i, (find, repl) in enumerate(edits, 1):
            count = text.count(find)
            if count != 1:
                first = find.strip().split("\n")[0]
                raise PlantError(
                    f"{spec_path}: snippet {i} of {name} (starting {first!r}) occurs {count} times "
                    f"in {os.path.join(src, name)}, not once: the product changed; "
                    "update the plant")
            text = text.replace(find, repl)
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out, name))


def self_test():
    """A snippet found once is replaced; one missing or repeated fails, naming the file."""
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "src"), os.path.join(d, "out")
        os.makedirs(src)
        with open(os.path.join(src, "a.h"), "w") as f:
            f.write("one\ntwo\nthree\ntwo2\n")
        spec = os.path.join(d, "spec")

        def run(text):
            with open(spec, "w") as f:
                f.write(text)
            plant(src, out, spec)
            with open(os.path.join(out, "a.h")) as f:
                return f.read()

        got = run("file a.h\n@@@ find\ntwo\n@@@ replace\nTWO\n@@@ end\n")
        assert got == "one\nTWO\nthree\ntwo2\n", got
        assert run("file a.h\n@@@ find\nthree\n@@@ replace\n@@@ end\n") == "one\ntwo\ntwo2\n"
        for bad, why in [("file a.h\n@@@ find\nfour\n@@@ replace\nx\n@@@ end\n", "0 times"),
                         ("file a.h\n@@@ find\ne\n@@@ replace\nx\n@@@ end\n", "2 times"),
                         ("file a.h\n@@@ find\ntwo\n@@@ replace\nx\n", "not closed"),
                         ("@@@ find\ntwo\n@@@ replace\nx\n@@@ end\n", "before any")]:
            try:
                run(bad)
            except PlantError as e:
                assert why in str(e), (bad, str(e))
            else:
                raise AssertionError(f"not refused: {bad!r}")
    print("plant self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src")
    ap.add_argument("--out")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("spec", nargs="?")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not (a.src and a.out and a.spec):
        ap.error("--src, --out and SPEC are needed")
    try:
        plant(a.src, a.out, a.spec)
    except (PlantError, OSError) as e:
        print(f"plant.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
