#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Upstreams and a client for test_upstream.sh. Standard library only.

  upstreams.py serve ADDR --stats FILE
      A DNS server on ADDR port 53, UDP and TCP: every A query gets one A record whose address
      is derived from the name (zlib.crc32, so a client can check it got its own name's answer),
      anything else NXDOMAIN. TCP connections are kept open and may carry many queries
      (pipelined); their answers go out in the order they came. On SIGTERM writes JSON to FILE:
      tcp_connections (accepted in all), tcp_queries, udp_queries.
  upstreams.py loop ADDR --to SERVER --stats FILE
      A forwarder that loops: every UDP query received on ADDR port 53 is sent on to SERVER
      port 53 and its answer relayed back. On SIGTERM writes JSON to FILE: "queries", the
      monotonic second (since start) of each query received.
  upstreams.py ask SERVER --names N --qps Q --suffix ZONE [--timeout S]
      N never-seen names under ZONE, type A, over UDP at Q queries per second; prints JSON:
      sent, answered (NOERROR with the address the name must have), wrong, lost.

SERVER and ADDR are IPv4 addresses inside the test's namespaces.
"""
import argparse
import json
import random
import selectors
import signal
import socket
import struct
import sys
import time
import zlib

PORT = 53


def wire_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def name_ip(lname):
    """The address a name (lowercase wire) is answered with: 198.18.0.0/15, data only."""
    h = zlib.crc32(lname)
    return bytes([198, 18 | ((h >> 16) & 1), (h >> 8) & 0xFF, h & 0xFF])


def question(msg):
    """(qname as sent, qtype, end of question) of a message; raises ValueError."""
    pos = 12
    while True:
        if pos >= len(msg):
            raise ValueError("cut")
        n = msg[pos]
        if n & 0xC0:
            raise ValueError("label type")
        pos += 1 + n
        if n == 0:
            break
    if pos + 4 > len(msg):
        raise ValueError("cut")
    qtype = struct.unpack("!H", msg[pos:pos + 2])[0]
    return msg[12:pos], qtype, pos + 4


def answer(msg):
    """The reply to query msg, or None."""
    if len(msg) < 12 or msg[2] & 0x80:
        return None
    try:
        qname, qtype, end = question(msg)
    except ValueError:
        return None
    qid = msg[0:2]
    flags = 0x8180 | (msg[2] & 0x01) << 8
    if qtype == 1:
        hdr = qid + struct.pack("!H4H", flags, 1, 1, 0, 0)
        rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + name_ip(qname.lower())
        return hdr + msg[12:end] + rr
    return qid + struct.pack("!H4H", flags | 3, 1, 0, 0, 0) + msg[12:end]


def write_stats(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)


def serve(a):
    sel = selectors.DefaultSelector()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    udp.bind((a.addr, PORT))
    udp.setblocking(False)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((a.addr, PORT))
    tcp.listen(64)
    tcp.setblocking(False)
    sel.register(udp, selectors.EVENT_READ, "udp")
    sel.register(tcp, selectors.EVENT_READ, "listen")
    st = {"tcp_connections": 0, "tcp_queries": 0, "udp_queries": 0}
    bufs = {}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        for key, _ in sel.select(0.2):
            if key.data == "udp":
                for _ in range(64):
                    try:
                        m, peer = udp.recvfrom(4096)
                    except BlockingIOError:
                        break
                    st["udp_queries"] += 1
                    r = answer(m)
                    if r:
                        udp.sendto(r, peer)
            elif key.data == "listen":
                try:
                    c, _ = tcp.accept()
                except BlockingIOError:
                    continue
                st["tcp_connections"] += 1
                c.setblocking(True)
                c.settimeout(2)
                sel.register(c, selectors.EVENT_READ, "conn")
                bufs[c] = b""
            else:
                c = key.fileobj
                try:
                    d = c.recv(65536)
                except OSError:
                    d = b""
                if not d:
                    sel.unregister(c)
                    c.close()
                    del bufs[c]
                    continue
                b = bufs[c] + d
                out = b""
                while len(b) >= 2 and len(b) >= 2 + struct.unpack("!H", b[:2])[0]:
                    n = struct.unpack("!H", b[:2])[0]
                    r = answer(b[2:2 + n])
                    st["tcp_queries"] += 1
                    if r:
                        out += struct.pack("!H", len(r)) + r
                    b = b[2 + n:]
                bufs[c] = b
                try:
                    c.sendall(out)
                except OSError:
                    pass
    write_stats(a.stats, st)


def loop(a):
    sel = selectors.DefaultSelector()
    lsn = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    lsn.bind((a.addr, PORT))
    lsn.setblocking(False)
    sel.register(lsn, selectors.EVENT_READ, None)
    t0 = time.monotonic()
    seen = []
    socks = {}  # one socket per query relayed: its answer goes back to the peer
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        for key, _ in sel.select(0.2):
            if key.data is None:
                try:
                    m, peer = lsn.recvfrom(4096)
                except BlockingIOError:
                    continue
                seen.append(round(time.monotonic() - t0, 3))
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.setblocking(False)
                try:
                    s.sendto(m, (a.to, PORT))
                except OSError:
                    s.close()
                    continue
                socks[s] = time.monotonic()
                sel.register(s, selectors.EVENT_READ, peer)
            else:
                s = key.fileobj
                try:
                    r = s.recv(4096)
                    lsn.sendto(r, key.data)
                except OSError:
                    pass
                sel.unregister(s)
                s.close()
                del socks[s]
        now = time.monotonic()
        for s in [s for s, t in socks.items() if now - t > 5]:
            sel.unregister(s)
            s.close()
            del socks[s]
    write_stats(a.stats, {"queries": seen})


def ask(a):
    rng = random.Random(a.seed)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
    s.connect((a.server, PORT))
    s.setblocking(False)
    suffix = wire_name(a.suffix)
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
    want = {}
    answered = wrong = 0
    wrong_examples = []

    def drain():
        nonlocal answered, wrong
        while True:
            try:
                r = s.recv(4096)
            except (BlockingIOError, ConnectionRefusedError):
                return
            qid = struct.unpack("!H", r[:2])[0] if len(r) >= 2 else -1
            lname = want.pop(qid, None)
            if lname is None:
                continue
            ok = False
            try:
                qname, _, end = question(r)
                ok = (r[3] & 0xF) == 0 and qname.lower() == lname and r.endswith(name_ip(lname))
            except ValueError:
                pass
            if ok:
                answered += 1
            else:
                wrong += 1
                if len(wrong_examples) < 5:
                    wrong_examples.append(r.hex())

    t0 = time.monotonic()
    batch = max(1, a.qps // 500)
    for i in range(a.names):
        label = bytes(rng.choice(alphabet) for _ in range(16))
        lname = bytes([16]) + label + suffix
        want[i] = lname
        msg = struct.pack("!6H", i, 0x0100, 1, 0, 0, 0) + lname + struct.pack("!HH", 1, 1)
        try:
            s.send(msg)
        except (BlockingIOError, ConnectionRefusedError):
            pass
        if i % batch == 0:
            drain()
            ahead = t0 + i / a.qps - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    sent_s = time.monotonic() - t0
    end = time.monotonic() + a.timeout
    while want and time.monotonic() < end:
        time.sleep(0.05)
        drain()
    print(json.dumps({"sent": a.names, "seconds": round(sent_s, 2), "answered": answered,
                      "wrong": wrong, "lost": len(want), "wrong_examples": wrong_examples}))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve")
    p.add_argument("addr")
    p.add_argument("--stats", required=True)
    p = sub.add_parser("loop")
    p.add_argument("addr")
    p.add_argument("--to", required=True)
    p.add_argument("--stats", required=True)
    p = sub.add_parser("ask")
    p.add_argument("server")
    p.add_argument("--names", type=int, default=10000)
    p.add_argument("--qps", type=int, default=5000)
    p.add_argument("--suffix", default="tcp.example.net")
    p.add_argument("--timeout", type=float, default=3)
    p.add_argument("--seed", type=int, default=22)
    a = ap.parse_args()
    {"serve": serve, "loop": loop, "ask": ask}[a.cmd](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
