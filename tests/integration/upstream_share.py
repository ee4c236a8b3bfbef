#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Clients and a slow upstream for test_prefetch.sh and test_fair_share.sh. Standard library only.

  upstream_share.py slow-upstream ADDR [--delay-ms 50] [--ttl 5] --log FILE
      A DNS server on ADDR:53 that answers every query with one A record (192.0.2.1, TTL --ttl)
      after --delay-ms, many at once (replies are scheduled, never blocking the socket), and
      writes "SENT_REALTIME NAME" to FILE for each answer as it sends it.
  upstream_share.py ask SERVER --name NAME [--rate 20] [--seconds 30] [--timeout 2] --out FILE
      A pod asking NAME (type A) steadily: one query at a time, the next one 1/rate after the
      last was sent (or at once if its answer took longer). Per query, a JSON line: send time
      (realtime), latency from send to the kernel's receive timestamp (SO_TIMESTAMPNS), rcode,
      the answer's TTL; a lost query has latency null.
  upstream_share.py pace SERVER --names A,B,... | --fresh ZONE [--rate 100] [--seconds 10]
                         [--timeout 1] --out FILE
      Queries at a steady rate, not waiting for answers: NAME in turn, or a never-seen name
      under ZONE each time. Writes one JSON object: sent, answered within --timeout (any rcode
      but SERVFAIL), by rcode, late, lost, the latency percentiles.
  upstream_share.py flood SERVER --fresh ZONE [--rate 20000] [--seconds 10]
      Never-seen names under ZONE at --rate (messages made before the clock starts), replies
      drained and counted; prints one JSON object: sent, seconds, achieved rate, rcodes.

SERVER is an IPv4 address, port 53. Only meant for addresses inside a test's namespaces.
"""
import argparse
import heapq
import json
import os
import random
import select
import socket
import struct
import sys
import time

PORT = 53
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def wire_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def query(qid, name, qtype=1):
    return struct.pack("!6H", qid, 0x0100, 1, 0, 0, 0) + wire_name(name) + struct.pack("!HH", qtype, 1)


def question_end(msg):
    pos = 12
    while pos < len(msg) and msg[pos]:
        pos += 1 + msg[pos]
    return pos + 5


def read_name(msg, pos):
    labels = []
    while True:
        n = msg[pos]
        if n & 0xC0 == 0xC0:
            sub, _ = read_name(msg, ((n & 0x3F) << 8) | msg[pos + 1])
            return labels + sub, pos + 2
        pos += 1
        if n == 0:
            return labels, pos
        labels.append(msg[pos:pos + n].decode(errors="replace").lower())
        pos += n


def first_ttl(msg):
    """The TTL of the first answer record, or None."""
    if struct.unpack("!H", msg[6:8])[0] == 0:
        return None
    _, pos = read_name(msg, 12)
    pos += 4
    _, pos = read_name(msg, pos)
    return struct.unpack("!I", msg[pos + 4:pos + 8])[0]


def recv_ts(sock):
    """(message, kernel receive time as realtime seconds)."""
    msg, anc, _, _ = sock.recvmsg(4096, 256)
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("@qq", data[:16])
            return msg, sec + nsec / 1e9
    return msg, time.time()


def client_socket(server):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.connect((server, PORT))
    return s


def cmd_slow_upstream(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a.addr, PORT))
    s.setblocking(False)
    log = open(a.log, "a", buffering=1)
    due = []  # (send at, seq, reply, peer, name)
    seq = 0
    while True:
        timeout = max(0.0, due[0][0] - time.monotonic()) if due else 1.0
        r, _, _ = select.select([s], [], [], timeout)
        if r:
            while True:
                try:
                    msg, peer = s.recvfrom(4096)
                except BlockingIOError:
                    break
                if len(msg) < 17 or msg[2] & 0x80:
                    continue
                qe = question_end(msg)
                name = ".".join(read_name(msg, 12)[0])
                qtype = struct.unpack("!H", msg[qe - 4:qe - 2])[0]
                an = 1 if qtype == 1 else 0
                rep = bytearray(msg[:qe])
                rep[2] = 0x81 | (msg[2] & 0x01)
                rep[3] = 0x80
                rep[4:12] = struct.pack("!4H", 1, an, 0, 0)
                if an:
                    rep += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, a.ttl, 4) + bytes([192, 0, 2, 1])
                seq += 1
                heapq.heappush(due, (time.monotonic() + a.delay_ms / 1000, seq, bytes(rep), peer, name))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, rep, peer, name = heapq.heappop(due)
            # Before sending: the time logged is never after the client receives the answer.
            t = time.time()
            try:
                s.sendto(rep, peer)
            except OSError:
                continue
            log.write("%.6f %s\n" % (t, name))


def cmd_ask(a):
    s = client_socket(a.server)
    out = open(a.out, "w")
    end = time.monotonic() + a.seconds
    gap = 1.0 / a.rate
    qid = random.randrange(65536)
    while time.monotonic() < end:
        qid = (qid + 1) & 0xFFFF
        t_mono = time.monotonic()
        t_send = time.time()
        s.send(query(qid, a.name))
        rec = {"t": t_send, "latency_ms": None, "rcode": None, "ttl": None}
        deadline = t_mono + a.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([s], [], [], left)[0]:
                break
            msg, t_recv = recv_ts(s)
            if len(msg) < 12 or struct.unpack("!H", msg[:2])[0] != qid:
                continue
            rec.update(latency_ms=(t_recv - t_send) * 1000, rcode=RCODES.get(msg[3] & 0xF, str(msg[3] & 0xF)),
                       ttl=first_ttl(msg))
            break
        out.write(json.dumps(rec) + "\n")
        ahead = t_mono + gap - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    out.close()


def percentile(v, p):
    if not v:
        return None
    v = sorted(v)
    return round(v[min(len(v) - 1, int(len(v) * p / 100))], 3)


def cmd_pace(a):
    s = client_socket(a.server)
    s.setblocking(False)
    names = a.names.split(",") if a.names else None
    tag = "%x" % random.randrange(1 << 32)
    sent = {}  # qid -> send time (realtime)
    lat, rcodes, late, n_sent = [], {}, 0, 0
    t0 = time.monotonic()
    end = t0 + a.seconds

    def drain():
        nonlocal late
        while True:
            try:
                msg, t_recv = recv_ts(s)
            except BlockingIOError:
                return
            if len(msg) < 12:
                continue
            t = sent.pop(struct.unpack("!H", msg[:2])[0], None)
            if t is None:
                continue
            ms = (t_recv - t) * 1000
            rc = RCODES.get(msg[3] & 0xF, str(msg[3] & 0xF))
            rcodes[rc] = rcodes.get(rc, 0) + 1
            if ms > a.timeout * 1000:
                late += 1
            elif rc != "SERVFAIL":
                lat.append(ms)

    i = 0
    while time.monotonic() < end:
        name = names[i % len(names)] if names else "%s-%d.%s" % (tag, i, a.fresh)
        qid = i & 0xFFFF
        sent[qid] = time.time()
        s.send(query(qid, name))
        n_sent += 1
        i += 1
        while True:
            ahead = t0 + i / a.rate - time.monotonic()
            if ahead <= 0:
                break
            if select.select([s], [], [], ahead)[0]:
                drain()
    stop = time.monotonic() + a.timeout + 0.5
    while sent and time.monotonic() < stop:
        if select.select([s], [], [], 0.05)[0]:
            drain()
    res = {"sent": n_sent, "answered": len(lat), "late": late, "lost": len(sent), "rcodes": rcodes,
           "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99), "max_ms": percentile(lat, 100)}
    with open(a.out, "w") as f:
        f.write(json.dumps(res) + "\n")


def cmd_flood(a):
    s = client_socket(a.server)
    s.setblocking(False)
    n = int(a.rate * a.seconds)
    tag = "%x" % random.randrange(1 << 32)
    tail = wire_name(a.fresh) + struct.pack("!HH", 1, 1)
    msgs = []
    for i in range(n):
        label = ("%s%d" % (tag, i)).encode()
        msgs.append(struct.pack("!6H", i & 0xFFFF, 0x0100, 1, 0, 0, 0) + bytes([len(label)]) + label + tail)
    rcodes = {}
    sent = 0

    def drain():
        while True:
            try:
                m = s.recv(4096)
            except (BlockingIOError, ConnectionRefusedError):
                return
            rc = RCODES.get(m[3] & 0xF, "?") if len(m) > 3 else "?"
            rcodes[rc] = rcodes.get(rc, 0) + 1

    batch = max(1, int(a.rate) // 500)
    t0 = time.monotonic()
    for i, m in enumerate(msgs):
        try:
            s.send(m)
            sent += 1
        except (BlockingIOError, ConnectionRefusedError):
            pass
        if i % batch == 0:
            drain()
            ahead = t0 + i / a.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    secs = time.monotonic() - t0
    stop = time.monotonic() + 2
    while time.monotonic() < stop:
        if select.select([s], [], [], 0.1)[0]:
            drain()
    print(json.dumps({"sent": sent, "seconds": round(secs, 2), "rate": round(sent / secs), "rcodes": rcodes}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("slow-upstream")
    u.add_argument("addr")
    u.add_argument("--delay-ms", type=float, default=50)
    u.add_argument("--ttl", type=int, default=5)
    u.add_argument("--log", required=True)
    k = sub.add_parser("ask")
    k.add_argument("server")
    k.add_argument("--name", required=True)
    k.add_argument("--rate", type=float, default=20)
    k.add_argument("--seconds", type=float, default=30)
    k.add_argument("--timeout", type=float, default=2)
    k.add_argument("--out", required=True)
    c = sub.add_parser("pace")
    c.add_argument("server")
    g = c.add_mutually_exclusive_group(required=True)
    g.add_argument("--names")
    g.add_argument("--fresh")
    c.add_argument("--rate", type=float, default=100)
    c.add_argument("--seconds", type=float, default=10)
    c.add_argument("--timeout", type=float, default=1)
    c.add_argument("--out", required=True)
    f = sub.add_parser("flood")
    f.add_argument("server")
    f.add_argument("--fresh", required=True)
    f.add_argument("--rate", type=float, default=20000)
    f.add_argument("--seconds", type=float, default=10)
    a = p.parse_args()
    {"slow-upstream": cmd_slow_upstream, "ask": cmd_ask, "pace": cmd_pace, "flood": cmd_flood}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
