#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every link and every repository path in the documentation resolves (issue 24).

Reads every Markdown file of the repository (README.md, docs/**/*.md and the READMEs beside the
code: deploy/kubernetes/, tests/bench/, ...; build folders and hidden ones left out) and checks:

1. Each relative link, inline `[text](target)`, image `![alt](src)` or reference definition
   `[ref]: target`, names a file or folder that exists (relative to the document, as GitHub
   resolves it), inside the repository; with `#anchor`, the target is a Markdown file with a
   heading whose GitHub anchor is that (lowercase, punctuation dropped, spaces to hyphens, `-1`,
   `-2` for repeats) or an explicit `id="..."` / `name="..."`. `#anchor` alone is the document
   itself. Links with a scheme (https:, mailto:) are not fetched: nothing goes to the network.
2. Each code span that is a repository path exists: it has a slash and either ends in a file
   extension or starts with a top-level folder of the repository (control/, tests/, ...). It is
   looked up from the repository root, then from the document's folder, then (C headers) from the
   build's include directories, as `"records/records.h"` is written, then as a target the
   folder's meson.build makes (`control/ndcache`, as the benchmarks name what they build). Spans
   with a placeholder (`<ns>`, `{a,b}`, `$VAR`, `BUILD/`) and shorthands (`ca.pem/.key`) are not
   paths; a `*` is a glob that must match something. Absolute paths (`/sys/fs/bpf`) are the
   machine's, not the repository's, and are not checked, nor are build outputs (`build*/...`) and
   the paths of other projects that docs/FLEET.md cites.

Fenced code blocks are skipped (commands, not references); inline code inside link text counts as
the link.

Usage: check_links.py --source SRC        check the repository at SRC
       check_links.py --self-test         plant broken links in a temporary tree and show that
                                          each is reported (and that the good ones are not)
Exit 0 when everything resolves, 1 with one line per broken reference, 2 when it cannot check.
"""

import argparse
import glob
import os
import re
import sys
import tempfile

TOP_LEVEL = ("bpf", "control", "dataplane", "deploy", "docs", "include", "tests", ".ci")
INCLUDE_DIRS = ("include", "control", "dataplane")  # the project's include_directories
SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE_RE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR_RE = re.compile(r"""<a\s[^>]*(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
REF_DEF_RE = re.compile(r"^\s{0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
EXTENSION_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]*$")
PLACEHOLDER_RE = re.compile(r"[<>{}$=@,;()\[\]|\s]")
# Paths in other projects' repositories that the docs cite as sources of a fact (docs/FLEET.md:
# files of kubernetes/kubernetes); they name no file of this repository.
FOREIGN_PREFIXES = ("staging/src/k8s.io/", "cmd/kube-proxy/")


def github_anchor(heading):
    """The anchor GitHub gives a heading's text (before de-duplication)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts as its text
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w keeps letters, digits and _ (Unicode too)
    return text.replace(" ", "-")


def prose_lines(text):
    """(line number, line) of every line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        match = FENCE_RE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield number, line


def anchors_of(path, cache):
    if path not in cache:
        seen = {}
        anchors = set()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for _, line in prose_lines(text):
            match = HEADING_RE.match(line)
            if match:
                base = github_anchor(match.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                anchors.add(base if count == 0 else f"{base}-{count}")
            anchors.update(EXPLICIT_ANCHOR_RE.findall(line))
        cache[path] = anchors
    return cache[path]


def inline_links(line):
    """Targets of [text](target) and ![alt](target) on a line; text may hold brackets and code."""
    targets = []
    i = 0
    while True:
        start = line.find("[", i)
        if start < 0:
            return targets
        # an opening bracket inside a code span is not a link
        if line[:start].count("`") % 2 == 1:
            i = start + 1
            continue
        depth, j = 0, start
        while j < len(line):
            if line[j] == "[":
                depth += 1
            elif line[j] == "]":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j >= len(line) - 1 or line[j + 1] != "(":
            i = start + 1
            continue
        end = line.find(")", j + 2)
        if end < 0:
            return targets
        target = line[j + 2 : end].strip()
        if target.startswith("<") and target.endswith(">"):
            target = target[1:-1]
        target = target.split(' "')[0].strip()  # an optional "title"
        targets.append(target)
        i = end + 1


def inside(root, path):
    root = os.path.realpath(root)
    path = os.path.realpath(path)
    return path == root or path.startswith(root + os.sep)


def check_link(root, doc, target, cache):
    """An error message, or None when the link resolves."""
    if SCHEME_RE.match(target) or target.startswith("//"):
        return None
    path_part, _, anchor = target.partition("#")
    if path_part == "":
        dest = doc
    elif path_part.startswith("/"):
        dest = os.path.join(root, path_part.lstrip("/"))
    else:
        dest = os.path.normpath(os.path.join(os.path.dirname(doc), path_part))
    if not inside(root, dest):
        return f"link {target}: outside the repository"
    if not os.path.exists(dest):
        return f"link {target}: {os.path.relpath(dest, root)} does not exist"
    if path_part.endswith("/") and not os.path.isdir(dest):
        return f"link {target}: {os.path.relpath(dest, root)} is not a folder"
    if anchor:
        if not dest.endswith(".md") or not os.path.isfile(dest):
            return f"link {target}: an anchor on {os.path.relpath(dest, root)}, not a Markdown file"
        if anchor not in anchors_of(dest, cache):
            where = os.path.relpath(dest, root)
            return f"link {target}: no heading with anchor #{anchor} in {where}"
    return None


def looks_like_path(span):
    if "/" not in span or PLACEHOLDER_RE.search(span):
        return False
    if SCHEME_RE.match(span) or span.startswith(("/", "~", "//")):
        return False
    first = span.split("/", 1)[0]
    if first.startswith("build"):
        return False  # build outputs, made by meson or a benchmark
    if first.isupper() and first not in TOP_LEVEL:
        return False  # a placeholder folder: BUILD/out.csv, DIR/control/ndcache
    if span.startswith(FOREIGN_PREFIXES):
        return False
    parts = span.rstrip("/").split("/")
    if any(re.fullmatch(r"\.[A-Za-z0-9]+", part) for part in parts[1:]):
        return False  # ca.pem/.key: ca.pem and ca.key, not a folder
    last = parts[-1]
    return first in TOP_LEVEL or first in ("..", ".") or bool(EXTENSION_RE.search(last))


def meson_target(root, span):
    """`control/ndcache`, `bpf/ndc_reflector.bpf.o`: a target the folder's meson.build makes.

    Benchmarks name what they build as meson does (the build folder's path of a target); the
    folder's meson.build must name the target, whole (executable('ndcache', ...)) or as a stem
    and a suffix (prog + '.bpf.o' over a list holding 'ndc_reflector')."""
    folder, _, name = span.rstrip("/").rpartition("/")
    meson_build = os.path.join(root, folder, "meson.build")
    if not folder or not name or not os.path.isfile(meson_build):
        return False
    with open(meson_build, encoding="utf-8") as f:
        text = f.read()
    if f"'{name}'" in text:
        return True
    stem, dot, suffix = name.partition(".")
    return bool(dot) and f"'{stem}'" in text and f"'.{suffix}'" in text


def path_exists(root, doc, span):
    candidates = [os.path.join(root, span), os.path.join(os.path.dirname(doc), span)]
    if span.endswith((".h", ".c")):
        candidates += [os.path.join(root, d, span) for d in INCLUDE_DIRS]
    for candidate in candidates:
        candidate = os.path.normpath(candidate)
        if not inside(root, candidate):
            continue
        if "*" in candidate:
            if glob.glob(candidate):
                return True
        elif os.path.exists(candidate) and (not span.endswith("/") or os.path.isdir(candidate)):
            return True
    return meson_target(root, span)


def check_doc(root, doc, cache):
    errors = []
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    rel = os.path.relpath(doc, root)
    for number, line in prose_lines(text):
        targets = inline_links(line)
        match = REF_DEF_RE.match(line)
        if match:
            targets.append(match.group(2))
        for target in targets:
            error = check_link(root, doc, target, cache)
            if error:
                errors.append(f"{rel}:{number}: {error}")
        for _, span in CODE_SPAN_RE.findall(line):
            span = span.strip().strip("\"'")
            if looks_like_path(span) and not path_exists(root, doc, span):
                errors.append(f"{rel}:{number}: path `{span}` does not exist")
    return errors


def documents(root):
    docs = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith((".", "build")))
        docs += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".md")]
    return docs


def check_tree(root):
    root = os.path.realpath(root)
    if not os.path.isfile(os.path.join(root, "README.md")):
        raise FileNotFoundError(f"{root}: no README.md")
    cache = {}
    errors = []
    docs = documents(root)
    for doc in docs:
        errors += check_doc(root, doc, cache)
    return docs, errors


SELF_TEST_README = """# Planted

## A heading: with `code`, punctuation!

## A heading: with `code`, punctuation!

Good: [self](#a-heading-with-code-punctuation), [repeat](#a-heading-with-code-punctuation-1),
[doc](docs/GUIDE.md), [doc anchor](docs/GUIDE.md#the-keys), [folder](docs/),
[web](https://example.invalid/x), `tests/present.sh`, `docs/bench/`, `"sub/present.h"`,
`tests/*.sh`, `10.96.0.0/12`, `/sys/fs/bpf`, `build/control/ndcache`, `tests/<kind>/x.c`.
```sh
cat tests/missing-in-a-fence.sh   # [fenced](nowhere.md): a command, not a reference
```
Broken: [file](docs/MISSING.md), [anchor](docs/GUIDE.md#no-such-heading),
[self anchor](#nowhere), [escape](../outside.md), `tests/missing.sh`, `docs/gone/`,
`tests/*.missing`, [code-text `x`](docs/ALSO-MISSING.md).
"""

SELF_TEST_GUIDE = """# Guide

## The keys

Back: [readme](../README.md#planted), [sibling](bench/R.md), `../tests/present.sh`.
Broken: [sibling](bench/NOPE.md), `../tests/nope.sh`.

[ref-broken]: missing-reference.md

Good: `tests/bench_tool`, `BUILD/out.csv`, `staging/src/k8s.io/x/y.go`, `bpf/prog.bpf.o`.
Broken: `tests/no_such_target`, `bpf/other.bpf.o`.
"""

# What the checker must report on the planted tree, and nothing else.
SELF_TEST_EXPECTED = [
    "README.md:14: link docs/MISSING.md: docs/MISSING.md does not exist",
    "README.md:14: link docs/GUIDE.md#no-such-heading: no heading with anchor #no-such-heading"
    " in docs/GUIDE.md",
    "README.md:15: link #nowhere: no heading with anchor #nowhere in README.md",
    "README.md:15: link ../outside.md: outside the repository",
    "README.md:15: path `tests/missing.sh` does not exist",
    "README.md:15: path `docs/gone/` does not exist",
    "README.md:16: path `tests/*.missing` does not exist",
    "README.md:16: link docs/ALSO-MISSING.md: docs/ALSO-MISSING.md does not exist",
    "docs/GUIDE.md:6: link bench/NOPE.md: docs/bench/NOPE.md does not exist",
    "docs/GUIDE.md:6: path `../tests/nope.sh` does not exist",
    "docs/GUIDE.md:8: link missing-reference.md: docs/missing-reference.md does not exist",
    "docs/GUIDE.md:11: path `tests/no_such_target` does not exist",
    "tests/README.md:1: link nope.md: tests/nope.md does not exist",
    "docs/GUIDE.md:11: path `bpf/other.bpf.o` does not exist",
]


def self_test():
    with tempfile.TemporaryDirectory(prefix="ndc-links-") as tmp:
        root = os.path.join(tmp, "repo")
        for d in ("docs/bench", "tests", "include/sub", "bpf"):
            os.makedirs(os.path.join(root, d))
        files = {
            "README.md": SELF_TEST_README,
            "docs/GUIDE.md": SELF_TEST_GUIDE,
            "docs/bench/R.md": "# R\n",
            "tests/present.sh": "",
            "tests/README.md": "Beside the code: `ca.pem/.key`, [bad](nope.md).\n",
            "include/sub/present.h": "",
            "tests/meson.build": "executable('bench_tool', 'bench/tool.c')\n",
            "bpf/meson.build": "foreach prog : ['prog']\n  output : prog + '.bpf.o'\nendforeach\n",
        }
        for name, text in files.items():
            with open(os.path.join(root, name), "w", encoding="utf-8") as f:
                f.write(text)
        # the escape target exists, so only "outside the repository" can catch it
        with open(os.path.join(tmp, "outside.md"), "w", encoding="utf-8") as f:
            f.write("# Outside\n")
        _, errors = check_tree(root)
    missed = [e for e in SELF_TEST_EXPECTED if e not in errors]
    extra = [e for e in errors if e not in SELF_TEST_EXPECTED]
    for e in missed:
        print(f"self-test: planted defect not reported: {e}")
    for e in extra:
        print(f"self-test: reported, but not planted: {e}")
    if missed or extra:
        print("check_links.py self-test: FAILED")
        return 1
    print(f"check_links.py self-test: ok, each of the {len(SELF_TEST_EXPECTED)} planted broken "
          "references reported, the good ones accepted")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--source", help="repository root to check")
    group.add_argument("--self-test", action="store_true",
                       help="show the check failing on planted broken links")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    try:
        docs, errors = check_tree(args.source)
    except OSError as e:
        print(f"check_links.py: cannot check: {e}")
        return 2
    for e in errors:
        print(e)
    if errors:
        print(f"check_links.py: {len(errors)} broken reference(s) in {len(docs)} documents")
        return 1
    print(f"check_links.py: every link and repository path resolves in {len(docs)} documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
