#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile clients for test_hostile.sh and tests/bench/flood_bench.sh. Standard library only.

  hostile.py probe SERVER --ask NAME=IP [--ask ...] [--qps N] [--timeout S] --out FILE
      A steady prober: asks each NAME for A in turn at N queries per second until SIGTERM or
      SIGINT, then waits S seconds for stragglers and writes one JSON object to FILE: sent,
      answered, lost (no reply within S), wrong (a reply that is not NOERROR with exactly
      the expected address, or for another question), max_gap_ms (longest time without a good
      answer) and the first few wrong replies. Says "probe: first answer" on stderr at its first
      good answer (the caller waits for it: the prober is under way).
  hostile.py garbage SERVER [--count N] [--qps N] [--seed N]
      N malformed datagrams of many kinds (random bytes, lying counts, compression loops,
      oversized names, reserved label types, responses, every opcode, absurd EDNS, truncation,
      fragments); one socket per kind, and prints per kind how many replies came back. Any
      reply to a response (QR=1) is reported as "reflected".
  hostile.py tcp SERVER [--conns N] [--hold S]
      N TCP connections: idle, a lone length byte, a length and part of the message, a whole
      query never read back with more pipelined behind it; held S seconds, then closed. Says
      "tcp: N opened, holding" on stderr once they are open (what the caller waits for).
  hostile.py flood SERVER [--names N] [--qps N] [--suffix ZONE] [--seed N]
      N distinct random names under ZONE, type A, at N queries per second; replies are drained
      and counted by rcode.

SERVER is an IPv4 address; port 53. Only meant for addresses inside a test's namespaces.
"""
import argparse
import json
import random
import resource
import select
import signal
import socket
import struct
import sys
import time

PORT = 53


def wire_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def header(qid, flags=0x0100, qd=1, an=0, ns=0, ar=0):
    return struct.pack("!6H", qid, flags, qd, an, ns, ar)


def opt_rr(udp=1232, ext_rcode=0, version=0, flags=0, rdata=b""):
    return b"\0" + struct.pack("!HHBBHH", 41, udp, ext_rcode, version, flags, len(rdata)) + rdata


def query(qid, name, qtype=1, flags=0x0100, edns=True):
    q = header(qid, flags, 1, 0, 0, 1 if edns else 0) + wire_name(name) + struct.pack("!HH", qtype, 1)
    return q + opt_rr() if edns else q


def read_name(msg, pos):
    """Returns (lowercase dotted name, position after it); raises ValueError when malformed."""
    labels, jumps, end = [], 0, None
    while True:
        if pos >= len(msg):
            raise ValueError("name past end")
        c = msg[pos]
        if c & 0xC0 == 0xC0:
            if pos + 1 >= len(msg):
                raise ValueError("cut pointer")
            if end is None:
                end = pos + 2
            pos = ((c & 0x3F) << 8) | msg[pos + 1]
            jumps += 1
            if jumps > 64:
                raise ValueError("pointer loop")
            continue
        if c & 0xC0:
            raise ValueError("label type")
        if c == 0:
            return ".".join(labels).lower(), (end if end is not None else pos + 1)
        labels.append(msg[pos + 1 : pos + 1 + c].decode("ascii", "replace"))
        pos += 1 + c


def parse_reply(msg):
    """(id, flags, qname, qtype, [(name, type, rdata)] of the answer section)."""
    if len(msg) < 12:
        raise ValueError("runt")
    qid, flags, qd, an, _, _ = struct.unpack("!6H", msg[:12])
    if qd != 1:
        raise ValueError("qdcount %d" % qd)
    qname, pos = read_name(msg, 12)
    qtype = struct.unpack("!H", msg[pos : pos + 2])[0]
    pos += 4
    rrs = []
    for _ in range(an):
        name, pos = read_name(msg, pos)
        rtype, _, _, rdlen = struct.unpack("!HHIH", msg[pos : pos + 10])
        pos += 10
        rrs.append((name, rtype, msg[pos : pos + rdlen]))
        pos += rdlen
        if pos > len(msg):
            raise ValueError("rr past end")
    return qid, flags, qname, qtype, rrs


# ------------------------------------------------------------------------------------------------
def cmd_probe(a):
    targets = []
    for spec in a.ask:
        name, ip = spec.split("=")
        targets.append((name.lower().rstrip("."), socket.inet_aton(ip)))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((a.server, PORT))
    s.setblocking(False)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    out = {"sent": 0, "answered": 0, "lost": 0, "wrong": 0, "late": 0, "max_gap_ms": 0,
           "wrong_examples": []}
    pending = {}  # id -> (sent time, target index)
    interval = 1.0 / a.qps
    t0 = time.monotonic()
    next_send = t0
    last_good = t0
    i = 0

    def note_wrong(why):
        out["wrong"] += 1
        if len(out["wrong_examples"]) < 10:
            out["wrong_examples"].append(why)

    def receive(now):
        nonlocal last_good
        while True:
            try:
                msg = s.recv(4096)
            except BlockingIOError:
                return
            except ConnectionRefusedError:
                continue
            try:
                qid, flags, qname, qtype, rrs = parse_reply(msg)
            except (ValueError, struct.error) as e:
                note_wrong("unparseable reply: %s" % e)
                continue
            if qid not in pending:
                out["late"] += 1  # answered after we gave up: already counted lost
                continue
            sent, ti = pending.pop(qid)
            name, ip = targets[ti]
            rcode = flags & 0xF
            addrs = [rd for (n, t, rd) in rrs if t == 1]
            if not flags & 0x8000 or qname != name or qtype != 1:
                note_wrong("%s: reply for %s/%d flags %#x" % (name, qname, qtype, flags))
            elif rcode != 0 or addrs != [ip]:
                note_wrong("%s: rcode %d, A %s" % (name, rcode,
                                                   [socket.inet_ntoa(x) for x in addrs if len(x) == 4]))
            else:
                if not out["answered"]:
                    print("probe: first answer", file=sys.stderr, flush=True)
                out["answered"] += 1
                gap = (now - last_good) * 1000
                out["max_gap_ms"] = max(out["max_gap_ms"], int(gap))
                last_good = now

    stopped_at = None
    while True:
        now = time.monotonic()
        if stop and stopped_at is None:
            stopped_at = now
        if stopped_at is not None and (not pending or now > stopped_at + a.timeout):
            break
        if stopped_at is None and now >= next_send:
            qid = random.getrandbits(16)
            while qid in pending:
                qid = random.getrandbits(16)
            ti = i % len(targets)
            i += 1
            out["sent"] += 1
            try:
                s.send(query(qid, targets[ti][0]))
                pending[qid] = (now, ti)
            except OSError:
                out["lost"] += 1
            next_send += interval
            if next_send < now - 1:  # we were descheduled: do not burst to catch up
                next_send = now
        for qid in [q for q, (t, _) in pending.items() if now - t > a.timeout]:
            del pending[qid]
            out["lost"] += 1
        wait = 0.05 if stopped_at is not None else max(0.0, min(next_send - now, 0.05))
        r, _, _ = select.select([s], [], [], wait)
        if r:
            receive(time.monotonic())
    out["lost"] += len(pending)
    out["seconds"] = round(time.monotonic() - t0, 1)
    with open(a.out, "w") as f:
        json.dump(out, f)
        f.write("\n")


# ------------------------------------------------------------------------------------------------
def gen_kinds(rng):
    """Name -> function(rng, qid) returning one malformed datagram."""
    good = "kubernetes.default.svc.cluster.local"

    def rnd(r, qid):
        return bytes(r.getrandbits(8) for _ in range(r.randint(0, 600)))

    def runt(r, qid):
        return struct.pack("!H", qid)[: r.randint(0, 2)] + bytes(r.getrandbits(8) for _ in range(r.randint(0, 9)))

    def lying_counts(r, qid):
        body = wire_name(good) + struct.pack("!HH", 1, 1)
        qd, an, ns, ar = r.choice([(0, 0, 0, 0), (2, 0, 0, 0), (65535, 0, 0, 0), (1, 65535, 0, 0),
                                   (1, 0, 65535, 0), (1, 0, 0, 65535), (1, 3, 0, 0), (1, 0, 0, 2)])
        msg = header(qid, 0x0100, qd, an, ns, ar) + body
        if r.random() < 0.3:
            msg = header(qid, 0x0100, 1, 0, 0, 0)  # a question promised, none there
        if r.random() < 0.3:
            msg = msg[: r.randint(12, len(msg))]  # cut anywhere
        return msg

    def compression_loop(r, qid):
        h = header(qid)
        tail = struct.pack("!HH", 1, 1)
        return h + r.choice([
            b"\xc0\x0c" + tail,  # points at itself
            b"\x01a\xc0\x0c" + tail,  # a label, then back to the start: a.a.a...
            b"\x01a\xc0\x10" + tail,  # points at its own pointer
            b"\xc0\x00" + tail,  # into the header
            b"\xc3\xff" + tail,  # past the end
            b"\x01a\xc0\x0e\x01b\xc0\x0c" + tail,  # two names pointing at each other
        ]) + (opt_rr() if r.random() < 0.5 else b"")

    def oversized_name(r, qid):
        kind = r.randint(0, 3)
        if kind == 0:
            name = b"".join(b"\x3f" + b"x" * 63 for _ in range(5)) + b"\0"  # 321 bytes
        elif kind == 1:
            name = b"\x01a" * 128 + b"\0"  # 256 bytes
        elif kind == 2:
            name = b"\x40" + b"y" * 64 + b"\0"  # label of 64: a reserved label type
        else:
            name = b"\x3f" + b"z" * 63 + b"\x3f" + b"z" * 63 + b"\x3f" + b"z" * 63 + b"\x3e" + b"z" * 62 + b"\0"
        return header(qid) + name + struct.pack("!HH", 1, 1)

    def label_type(r, qid):
        return header(qid) + bytes([r.choice([0x40, 0x41, 0x80, 0xBF])]) + b"abc\0" + struct.pack("!HH", 1, 1)

    def response(r, qid):
        # QR=1: must never be answered (reflection), in the kernel or in user space.
        flags = 0x8000 | r.choice([0x0000, 0x0400, 0x0180, 0x0003, 0x0100])
        msg = header(qid, flags, 1, r.randint(0, 1), 0, 0) + wire_name(r.choice([good, "www.example.com"]))
        msg += struct.pack("!HH", 1, 1)
        if msg[7]:
            msg += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + bytes([10, 0, 0, 1])
        return msg

    def opcode(r, qid):
        op = r.randint(0, 15)
        return query(qid, r.choice([good, "www.example.com", "nope.cluster.local"]), flags=(op << 11) | 0x0100,
                     edns=r.random() < 0.5)

    def edns_absurd(r, qid):
        q = header(qid, 0x0100, 1, 0, 0, 1) + wire_name(good) + struct.pack("!HH", 1, 1)
        kind = r.randint(0, 7)
        if kind == 0:  # rdlen past the end
            return q + b"\0" + struct.pack("!HHBBHH", 41, 1232, 0, 0, 0, 65535)
        if kind == 1:  # an option claiming 65535 bytes
            return q + opt_rr(rdata=struct.pack("!HH", 10, 65535) + b"x" * 8)
        if kind == 2:  # option header cut
            return q + opt_rr(rdata=b"\x00\x0a\x00")
        if kind == 3:  # two OPTs
            return q[:10] + b"\x00\x02" + q[12:] + opt_rr() + opt_rr()
        if kind == 4:  # OPT with a non-root owner
            return q + wire_name("x.example") + struct.pack("!HHBBHH", 41, 1232, 0, 0, 0, 0)
        if kind == 5:  # version 255, DO, UDP size 0 or 65535
            return q + opt_rr(udp=r.choice([0, 1, 65535]), version=255, flags=0x8000)
        if kind == 6:  # many options, one with a lying length in the middle
            rd = b"".join(struct.pack("!HH", r.randint(0, 65535), 4) + b"abcd" for _ in range(20))
            rd = rd[:40] + struct.pack("!HH", 8, 4000) + rd[44:]
            return q + opt_rr(rdata=rd)
        # cookie of absurd length
        return q + opt_rr(rdata=struct.pack("!HH", 10, 200) + b"c" * 200)

    def trailing(r, qid):
        return query(qid, good, edns=r.random() < 0.5) + bytes(r.getrandbits(8) for _ in range(r.randint(1, 40)))

    def qtypes(r, qid):
        # Valid framing, odd questions: meta types, class ANY/CH/NONE, type 0 and 65535.
        qt = r.choice([0, 251, 252, 253, 254, 255, 65535, 41, 249, 250])
        qc = r.choice([1, 3, 254, 255, 0, 65535])
        return header(qid) + wire_name(good) + struct.pack("!HH", qt, qc)

    def big(r, qid):
        # Over the MTU (fragments) and over the server's 4096-byte limit.
        n = r.choice([1600, 3000, 4097, 8000, 20000])
        return query(qid, good) + b"\0" * (n - len(query(qid, good)))

    return {
        "random": rnd, "runt": runt, "lying_counts": lying_counts,
        "compression_loop": compression_loop, "oversized_name": oversized_name,
        "label_type": label_type, "response": response, "opcode": opcode,
        "edns_absurd": edns_absurd, "trailing": trailing, "qtypes": qtypes, "big": big,
    }


def drain(sock, counts, kind):
    while True:
        try:
            sock.recv(65535)
            counts[kind] += 1
        except (BlockingIOError, ConnectionRefusedError):
            return


def cmd_garbage(a):
    rng = random.Random(a.seed)
    kinds = gen_kinds(rng)
    socks, replies, sent = {}, {}, {}
    for k in kinds:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((a.server, PORT))
        s.setblocking(False)
        socks[k], replies[k], sent[k] = s, 0, 0
    names = list(kinds)
    t0 = time.monotonic()
    for i in range(a.count):
        k = names[i % len(names)] if i < len(names) else rng.choice(names)
        try:
            socks[k].send(kinds[k](rng, rng.getrandbits(16)))
            sent[k] += 1
        except OSError:
            pass  # EMSGSIZE for the biggest: fine
        if i % 64 == 0:
            for kk in names:
                drain(socks[kk], replies, kk)
            ahead = t0 + i / a.qps - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    # What must not happen is a reply to a response (QR=1): a bounded window for late replies.
    time.sleep(1.0)
    for k in names:
        drain(socks[k], replies, k)
    print(json.dumps({"sent": sent, "replies": replies, "reflected": replies["response"],
                      "seconds": round(time.monotonic() - t0, 1)}))


# ------------------------------------------------------------------------------------------------
def cmd_tcp(a):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.conns + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, soft), max(want, hard)))
    conns, failed = [], 0
    q = query(1, "kubernetes.default.svc.cluster.local")
    framed = struct.pack("!H", len(q)) + q
    kinds = ["idle", "len_byte", "partial", "unread"]
    t0 = time.monotonic()
    for i in range(a.conns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(3)
        try:
            s.connect((a.server, PORT))
            k = kinds[i % len(kinds)]
            if k == "len_byte":
                s.send(framed[:1])
            elif k == "partial":
                s.send(struct.pack("!H", 300) + q[:20])
            elif k == "unread":
                s.send(framed * 50)  # pipelined, replies never read
            conns.append(s)
        except OSError:
            failed += 1
            s.close()
    opened = time.monotonic() - t0
    print("tcp: %d opened, holding" % len(conns), file=sys.stderr, flush=True)
    time.sleep(a.hold)  # a duration: the connections stay open this long
    # How many did the server close meanwhile (idle timeout, eviction)? Peek without blocking.
    closed = 0
    for s in conns:
        s.setblocking(False)
        try:
            while True:
                d = s.recv(65535)
                if not d:
                    closed += 1
                    break
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    print(json.dumps({"opened": len(conns), "failed": failed, "closed_by_server": closed,
                      "open_seconds": round(opened, 1)}))


# ------------------------------------------------------------------------------------------------
def cmd_flood(a):
    rng = random.Random(a.seed)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.connect((a.server, PORT))
    s.setblocking(False)
    suffix = wire_name(a.suffix)
    tail = struct.pack("!HH", 1, 1)
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
    rcodes = {}
    replies = 0
    sent = 0
    t0 = time.monotonic()
    batch = max(1, a.qps // 200)
    for i in range(a.names):
        label = bytes(rng.choice(alphabet) for _ in range(14))
        msg = struct.pack("!6H", i & 0xFFFF, 0x0100, 1, 0, 0, 0) + b"\x0e" + label + suffix + tail
        try:
            s.send(msg)
            sent += 1
        except BlockingIOError:
            pass
        except ConnectionRefusedError:
            pass
        if i % batch == 0:
            while True:
                try:
                    r = s.recv(4096)
                except (BlockingIOError, ConnectionRefusedError):
                    break
                replies += 1
                rc = r[3] & 0xF if len(r) > 3 else -1
                rcodes[rc] = rcodes.get(rc, 0) + 1
            ahead = t0 + i / a.qps - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    end = time.monotonic() + 2
    while time.monotonic() < end:
        r, _, _ = select.select([s], [], [], 0.1)
        if not r:
            continue
        try:
            m = s.recv(4096)
        except (BlockingIOError, ConnectionRefusedError):
            continue
        replies += 1
        rc = m[3] & 0xF if len(m) > 3 else -1
        rcodes[rc] = rcodes.get(rc, 0) + 1
    names = {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}
    print(json.dumps({"sent": sent, "replies": replies, "seconds": round(time.monotonic() - t0, 1),
                      "rcodes": {names.get(k, str(k)): v for k, v in sorted(rcodes.items())}}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("probe")
    pr.add_argument("server")
    pr.add_argument("--ask", action="append", required=True)
    pr.add_argument("--qps", type=float, default=300)
    pr.add_argument("--timeout", type=float, default=1.0)
    pr.add_argument("--out", required=True)
    g = sub.add_parser("garbage")
    g.add_argument("server")
    g.add_argument("--count", type=int, default=20000)
    g.add_argument("--qps", type=float, default=5000)
    g.add_argument("--seed", type=int, default=1)
    t = sub.add_parser("tcp")
    t.add_argument("server")
    t.add_argument("--conns", type=int, default=2000)
    t.add_argument("--hold", type=float, default=5)
    f = sub.add_parser("flood")
    f.add_argument("server")
    f.add_argument("--names", type=int, default=200000)
    f.add_argument("--qps", type=int, default=5000)
    f.add_argument("--suffix", default="flood.example.com")
    f.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    {"probe": cmd_probe, "garbage": cmd_garbage, "tcp": cmd_tcp, "flood": cmd_flood}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
