#!/usr/bin/env python3
"""tcx (Linux 6.6) from the tests: the programs on a link's hook, and attaching one.

Debian 12's bpftool (7.1) predates tcx, so the tests ask the kernel themselves (bpf(2)):

  tcx_progs.py DEV ingress|egress
      the ids of the programs attached with tcx to DEV's hook, one per line in the order they
      run; nothing where there are none (BPF_PROG_QUERY)
  tcx_progs.py attach|detach PROG DEV ingress|egress
      the program pinned at PROG attached to (last) or detached from DEV's hook, without a link
      (BPF_PROG_ATTACH / BPF_PROG_DETACH)
  tcx_progs.py link PROG DEV ingress|egress LINK
      the program pinned at PROG attached with a tcx link (BPF_LINK_CREATE), the link pinned at
      LINK: it stays until that pin goes

Exits 2 where the kernel has no tcx (the attach type is unknown to it), 1 on any other error.
Root, in DEV's network namespace.
"""
import ctypes
import errno
import os
import socket
import struct
import sys

BPF_SYSCALL = 321  # x86-64
BPF_OBJ_PIN, BPF_OBJ_GET = 6, 7
BPF_PROG_ATTACH, BPF_PROG_DETACH = 8, 9
BPF_PROG_QUERY = 16
BPF_LINK_CREATE = 28
ATTACH = {"ingress": 46, "egress": 47}  # BPF_TCX_INGRESS, BPF_TCX_EGRESS
MAX_IDS = 64

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


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


class BpfError(Exception):
    def __init__(self, what, err):
        super().__init__(f"{what}: {os.strerror(err)}")
        self.err = err


def bpf(cmd, attr, what):
    """bpf(cmd) on attr (a ctypes object or bytes, zero-padded to 128): its result."""
    if isinstance(attr, bytes):
        attr = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(ctypes.c_long(BPF_SYSCALL), ctypes.c_long(cmd), ctypes.byref(attr),
                     ctypes.c_ulong(ctypes.sizeof(attr)))
    if r < 0:
        raise BpfError(what, ctypes.get_errno())
    return r


def pinned(path):
    """An fd of the object pinned at path."""
    p = ctypes.create_string_buffer(path.encode())
    return bpf(BPF_OBJ_GET, struct.pack("=QII", ctypes.addressof(p), 0, 0), path)


def ifindex_of(dev):
    try:
        return socket.if_nametoindex(dev)
    except OSError as e:
        raise BpfError(dev, e.errno or errno.ENODEV) from None


def query(dev, hook):
    ids = (ctypes.c_uint32 * MAX_IDS)()
    q = Query(target_ifindex=ifindex_of(dev), attach_type=ATTACH[hook],
              prog_ids=ctypes.addressof(ids), count=MAX_IDS)
    bpf(BPF_PROG_QUERY, q, f"{dev} {hook}")
    for i in range(min(q.count, MAX_IDS)):
        print(ids[i])


def attach(verb, prog, dev, hook):
    # target ifindex, attach_bpf_fd, attach_type
    cmd = BPF_PROG_ATTACH if verb == "attach" else BPF_PROG_DETACH
    bpf(cmd, struct.pack("=III", ifindex_of(dev), pinned(prog), ATTACH[hook]),
        f"{verb} {prog} {dev} {hook}")


def link(prog, dev, hook, pin):
    # prog_fd, target_ifindex, attach_type, flags
    fd = bpf(BPF_LINK_CREATE, struct.pack("=IIII", pinned(prog), ifindex_of(dev), ATTACH[hook], 0),
             f"link {prog} {dev} {hook}")
    p = ctypes.create_string_buffer(pin.encode())
    bpf(BPF_OBJ_PIN, struct.pack("=QII", ctypes.addressof(p), fd, 0), pin)


def main(argv):
    try:
        if len(argv) == 2 and argv[1] in ATTACH:
            query(*argv)
        elif len(argv) == 4 and argv[0] in ("attach", "detach") and argv[3] in ATTACH:
            attach(*argv)
        elif len(argv) == 5 and argv[0] == "link" and argv[3] in ATTACH:
            link(*argv[1:])
        else:
            print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
            return 1
    except BpfError as e:
        print(f"tcx_progs: {e}", file=sys.stderr)
        return 2 if e.err == errno.EINVAL else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
