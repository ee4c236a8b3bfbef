#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Upstreams that fail quietly, and a paced client, for test_upstream_quiet.sh. Standard library.

  quiet_upstream.py serve ADDR --stats FILE [--formerr-prefix P] [--small-rcvbuf]
      A DNS server on ADDR port 53, UDP and TCP, answering as upstreams.py serve does (an A
      record derived from the name). Quiet failures on demand:
        SIGUSR1: every TCP connection open now is still read but never answered again (the
                 server behind a ClusterIP gone, conntrack keeping the flow); new ones answer.
        SIGUSR2: no TCP connection is read any more, open or new (a peer that stops reading;
                 with --small-rcvbuf its window is a few KB).
      --formerr-prefix P: a query whose first label starts with P gets FORMERR with no question
      section (UDP and TCP), as a server that could not read it. On SIGTERM writes JSON to
      FILE: tcp_connections, tcp_queries, udp_queries, formerr.
  quiet_upstream.py pace SERVER --qps Q --seconds S --suffix ZONE [--signal PID:SIG:AT]
                        [--after T] [--bad-every K --bad-prefix P] [--label-len L] [--timeout W]
      Never-seen names under ZONE, type A, over UDP at Q a second for S seconds; every Kth name's
      first label starts with P. --signal sends SIG to PID AT seconds after the start. Prints
      JSON: for all queries, for those sent from T seconds after the signal on ("after"), and
      for the P names ("bad"): sent, answered (NOERROR, the name's own address), servfail, lost
      (no reply within W s), wrong, p50_ms, max_ms.

SERVER and ADDR are IPv4 addresses inside the test's namespaces.
"""
import argparse
import json
import os
import random
import selectors
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from upstreams import PORT, answer, name_ip, question, wire_name, write_stats  # noqa: E402


def formerr(msg):
    """FORMERR with no question: the query's ID, QR, RD echoed, every count 0."""
    return msg[0:2] + struct.pack("!H4H", 0x8001 | (msg[2] & 0x01) << 8, 0, 0, 0, 0)


def reply(msg, prefix, st):
    if prefix and len(msg) > 13 and msg[13:13 + len(prefix)].lower() == prefix:
        st["formerr"] += 1
        return formerr(msg)
    return answer(msg)


def serve(a):
    sel = selectors.DefaultSelector()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    udp.bind((a.addr, PORT))
    udp.setblocking(False)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if a.small_rcvbuf:  # inherited by the accepted connections: a small window
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    tcp.bind((a.addr, PORT))
    tcp.listen(64)
    tcp.setblocking(False)
    sel.register(udp, selectors.EVENT_READ, "udp")
    sel.register(tcp, selectors.EVENT_READ, "listen")
    prefix = a.formerr_prefix.encode() if a.formerr_prefix else b""
    st = {"tcp_connections": 0, "tcp_queries": 0, "udp_queries": 0, "formerr": 0}
    bufs, frozen, held = {}, set(), []
    state = {"noread": False}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGUSR1, lambda *_: frozen.update(bufs.keys()))

    def noread(*_):
        state["noread"] = True
        for c in list(bufs):
            sel.unregister(c)
            held.append(c)
        bufs.clear()

    signal.signal(signal.SIGUSR2, noread)
    while not stop:
        for key, _ in sel.select(0.2):
            if key.data == "udp":
                for _ in range(64):
                    try:
                        m, peer = udp.recvfrom(4096)
                    except BlockingIOError:
                        break
                    st["udp_queries"] += 1
                    r = reply(m, prefix, st)
                    if r:
                        udp.sendto(r, peer)
            elif key.data == "listen":
                try:
                    c, _ = tcp.accept()
                except BlockingIOError:
                    continue
                st["tcp_connections"] += 1
                if state["noread"]:
                    held.append(c)  # open, never read
                    continue
                c.setblocking(True)
                c.settimeout(2)
                sel.register(c, selectors.EVENT_READ, "conn")
                bufs[c] = b""
            else:
                c = key.fileobj
                if c not in bufs:
                    continue
                try:
                    d = c.recv(65536)
                except OSError:
                    d = b""
                if not d:
                    sel.unregister(c)
                    c.close()
                    del bufs[c]
                    frozen.discard(c)
                    continue
                b = bufs[c] + d
                out = b""
                while len(b) >= 2 and len(b) >= 2 + struct.unpack("!H", b[:2])[0]:
                    n = struct.unpack("!H", b[:2])[0]
                    r = reply(b[2:2 + n], prefix, st)
                    st["tcp_queries"] += 1
                    if r and c not in frozen:
                        out += struct.pack("!H", len(r)) + r
                    b = b[2 + n:]
                bufs[c] = b
                try:
                    c.sendall(out)
                except OSError:
                    pass
    write_stats(a.stats, st)


def summarize(qs, timeout):
    sent = len(qs)
    answered = sum(1 for q in qs if q["r"] == "ok")
    servfail = sum(1 for q in qs if q["r"] == "servfail")
    wrong = sum(1 for q in qs if q["r"] == "wrong")
    lat = sorted(q["ms"] for q in qs if q["ms"] is not None)
    return {"sent": sent, "answered": answered, "servfail": servfail, "wrong": wrong,
            "lost": sent - answered - servfail - wrong,
            "p50_ms": lat[len(lat) // 2] if lat else None, "max_ms": lat[-1] if lat else None}


def pace(a):
    rng = random.Random(a.seed)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
    s.connect((a.server, PORT))
    s.setblocking(False)
    suffix = wire_name(a.suffix)
    bad_prefix = a.bad_prefix.encode()
    qs, want = [], {}
    sig_pid = sig_no = sig_at = None
    if a.signal:
        p, n, t = a.signal.split(":")
        sig_pid, sig_no, sig_at = int(p), getattr(signal, n), float(t)
    signalled = None

    def drain():
        while True:
            try:
                r = s.recv(4096)
            except (BlockingIOError, ConnectionRefusedError):
                return
            if len(r) < 12:
                continue
            q = want.pop(struct.unpack("!H", r[:2])[0], None)
            if q is None:
                continue
            q["ms"] = round((time.monotonic() - q["t"]) * 1000, 1)
            rcode = r[3] & 0xF
            try:
                qname, _, _ = question(r)
                good = rcode == 0 and qname.lower() == q["lname"] and \
                    r.endswith(name_ip(q["lname"]))
            except ValueError:
                good = False
            q["r"] = "ok" if good else "servfail" if rcode == 2 else "wrong"

    t0 = time.monotonic()
    n = int(a.qps * a.seconds)
    for i in range(n):
        now = time.monotonic()
        if sig_pid and signalled is None and now - t0 >= sig_at:
            os.kill(sig_pid, sig_no)
            signalled = now - t0
        bad = a.bad_every and i % a.bad_every == a.bad_every - 1
        labels = []
        left = a.label_len
        while left > 0:
            k = min(left, 60)
            labels.append(b"%0*x" % (k, rng.getrandbits(4 * k)))
            left -= k
        if bad:
            labels[0] = bad_prefix + labels[0][len(bad_prefix):]
        lname = b"".join(bytes([len(lb)]) + lb for lb in labels) + suffix
        qid = i & 0xFFFF
        q = {"t": time.monotonic(), "rel": now - t0, "lname": lname, "r": None, "ms": None,
             "bad": bool(bad)}
        qs.append(q)
        want[qid] = q
        msg = struct.pack("!6H", qid, 0x0100, 1, 0, 0, 0) + lname + struct.pack("!HH", 1, 1)
        try:
            s.send(msg)
        except (BlockingIOError, ConnectionRefusedError):
            pass
        drain()
        ahead = t0 + (i + 1) / a.qps - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    end = time.monotonic() + a.timeout
    while want and time.monotonic() < end:
        time.sleep(0.02)
        drain()
    out = {"seconds": round(time.monotonic() - t0, 2), "signal_at": signalled,
           "all": summarize(qs, a.timeout),
           "bad": summarize([q for q in qs if q["bad"]], a.timeout),
           "good": summarize([q for q in qs if not q["bad"]], a.timeout)}
    if signalled is not None:
        out["after"] = summarize([q for q in qs if q["rel"] >= signalled + a.after], a.timeout)
        out["lost_at"] = [round(q["rel"], 2) for q in qs if q["r"] != "ok"][:20]
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve")
    p.add_argument("addr")
    p.add_argument("--stats", required=True)
    p.add_argument("--formerr-prefix", default="")
    p.add_argument("--small-rcvbuf", action="store_true")
    p = sub.add_parser("pace")
    p.add_argument("server")
    p.add_argument("--qps", type=float, default=50)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--suffix", default="quiet.example.net")
    p.add_argument("--signal", default="")
    p.add_argument("--after", type=float, default=2)
    p.add_argument("--bad-every", type=int, default=0)
    p.add_argument("--bad-prefix", default="bad")
    p.add_argument("--label-len", type=int, default=16)
    p.add_argument("--timeout", type=float, default=3)
    p.add_argument("--seed", type=int, default=34)
    a = ap.parse_args()
    {"serve": serve, "pace": pace}[a.cmd](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
