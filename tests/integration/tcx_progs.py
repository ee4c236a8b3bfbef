#!/usr/bin/env python3
"""The ids of the programs attached with tcx (Linux 6.6) to a link's ingress or egress.

Prints one id per line, in the order they run; nothing where there are none. Exits 2 where the
kernel has no tcx (the query's attach type is unknown to it), 1 on any other error. Debian 12's
bpftool (7.1) predates tcx, so the tests ask the kernel themselves (BPF_PROG_QUERY).

Usage: tcx_progs.py DEV ingress|egress   (root, in the link's network namespace)
"""
import ctypes
import errno
import os
import socket
import sys

BPF_SYSCALL = 321  # x86-64
BPF_PROG_QUERY = 16
ATTACH = {"ingress": 46, "egress": 47}  # BPF_TCX_INGRESS, BPF_TCX_EGRESS
MAX_IDS = 64


class Query(ctypes.Structure):
    """union bpf_attr's query part (include/uapi/linux/bpf.h, Linux 6.6)."""

    _fields_ = [
        ("target_ifindex", ctypes.c_uint32),
        ("attach_type", ctypes.c_uint32),
        ("query_flags", ctypes.c_uint32),
        ("attach_flags", ctypes.c_uint32),
        ("prog_ids", ctypes.c_uint64),
        ("count", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("prog_attach_flags", ctypes.c_uint64),
        ("link_ids", ctypes.c_uint64),
        ("link_attach_flags", ctypes.c_uint64),
        ("revision", ctypes.c_uint64),
    ]


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ATTACH:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 1
    try:
        ifindex = socket.if_nametoindex(sys.argv[1])
    except OSError as e:
        print(f"tcx_progs: {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    ids = (ctypes.c_uint32 * MAX_IDS)()
    q = Query(target_ifindex=ifindex, attach_type=ATTACH[sys.argv[2]],
              prog_ids=ctypes.addressof(ids), count=MAX_IDS)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(BPF_SYSCALL), ctypes.c_long(BPF_PROG_QUERY),
                    ctypes.byref(q), ctypes.c_ulong(ctypes.sizeof(q))) < 0:
        err = ctypes.get_errno()
        print(f"tcx_progs: {sys.argv[1]} {sys.argv[2]}: {os.strerror(err)}", file=sys.stderr)
        return 2 if err == errno.EINVAL else 1
    for i in range(min(q.count, MAX_IDS)):
        print(ids[i])
    return 0


if __name__ == "__main__":
    sys.exit(main())
