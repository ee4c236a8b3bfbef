#!/usr/bin/env python3
"""Writes a C file defining `const char NAME[]` and `const size_t NAME_len` from a file."""
import sys

src, dst, name = sys.argv[1:4]
data = open(src, "rb").read()
with open(dst, "w") as out:
    out.write("/* Generated from %s by control/objects/embed.py. */\n#include <stddef.h>\n" % src)
    out.write("const char %s[] = {\n" % name)
    for i in range(0, len(data), 16):
        out.write("\t" + "".join("%d," % b for b in data[i:i + 16]) + "\n")
    out.write("\t0\n};\nconst size_t %s_len = %d;\n" % (name, len(data)))
