# SPDX-License-Identifier: MIT
"""What the DNS probers share (growth.py, prober.py): names on the wire, and UDP sockets whose
replies carry the kernel's receive time, so that a prober that was descheduled does not count its
own delay against the server. Python standard library only."""
import select
import socket
import struct
import time

# asm-generic/socket.h: SO_TIMESTAMPNS(_OLD), a struct timespec of two longs in the cmsg.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
TIMESPEC = struct.Struct("@qq")


def encode_name(name):
    out = bytearray()
    for label in name.rstrip(".").split("."):
        out.append(len(label))
        out += label.encode()
    out.append(0)
    return bytes(out)


def read_name(buf, off):
    """(lowercase name, offset after it); follows compression pointers, at most 64 of them."""
    labels, end, jumps = [], None, 0
    while True:
        if off >= len(buf):
            raise ValueError("name runs past the end")
        n = buf[off]
        if n & 0xC0 == 0xC0:
            if off + 1 >= len(buf):
                raise ValueError("truncated pointer")
            if end is None:
                end = off + 2
            jumps += 1
            if jumps > 64:
                raise ValueError("compression loop")
            off = ((n & 0x3F) << 8) | buf[off + 1]
            continue
        if n & 0xC0:
            raise ValueError("bad label type")
        off += 1
        if n == 0:
            break
        if off + n > len(buf):
            raise ValueError("label runs past the end")
        labels.append(bytes(buf[off : off + n]).decode("latin-1").lower())
        off += n
    return ".".join(labels), (end if end is not None else off)


def stamped_sockets(n):
    """n non-blocking UDP sockets, each on an ephemeral port the kernel picks at random, with
    receive timestamps and a 1 MiB receive buffer; (sockets, {fd: index}, a poll object with each
    registered for input)."""
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.bind(("0.0.0.0", 0))
        socks.append(s)
    poller = select.poll()
    for s in socks:
        poller.register(s, select.POLLIN)
    return socks, {s.fileno(): i for i, s in enumerate(socks)}, poller


def recv_stamped(sock):
    """(data, address, receive time): the kernel's timestamp, or now when it gave none. Raises
    what recvmsg raises (BlockingIOError when nothing is waiting, ICMP errors as OSError)."""
    data, anc, _, addr = sock.recvmsg(4096, socket.CMSG_SPACE(TIMESPEC.size))
    rx = time.time()
    for level, typ, cdata in anc:
        if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
            sec, nsec = TIMESPEC.unpack(cdata[: TIMESPEC.size])
            rx = sec + nsec / 1e9
    return data, addr, rx
