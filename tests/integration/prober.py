#!/usr/bin/env python3
"""DNS prober for the chaos test and benchmark: a steady rate of UDP queries, every reply checked.

  prober.py probe [options]     ask SERVER at --rate queries/s until "stop" (or EOF) on stdin
  prober.py garbage [options]   send --count malformed datagrams to SERVER at --rate/s, then exit
  prober.py unbound-data        records the upstream must serve (for lib.sh's UNBOUND_EXTRA)
  prober.py unbound-zones       unbound server: lines for the fresh names' redirect zone
  prober.py warm-names          "NAME TYPE ANSWER" of the cached names, to warm a cache with

Queries go out round-robin over --sockets non-blocking sockets, each bound to a random source
port, with a random ID; a reply is matched by (socket, ID, question). Three kinds are mixed in a
fixed pattern (2 cluster, 2 cached, 1 fresh of every 5): names of the sample cluster
(deploy/examples/sample-cluster.json) with their known records or NXDOMAIN; external names the
upstream answers from local-data (asked before, so cached); and never-seen external names under
fresh.example.com, which the upstream answers from a redirect zone.

A query is LOST when no matching reply came within --timeout seconds of sending it (the kernel's
receive timestamp decides, so a prober that was descheduled does not count its own delay), and
WRONG when the reply's source, header, question, rcode or records differ from the expected ones.
SERVFAIL for a fresh name is counted as SERVFAIL, not wrong, in an event marked servfail-ok.

Event windows come from stdin, one command a line:
  event NAME [servfail-ok]   a new window begins (the previous one ends); queries belong to the
                             window they were sent in
  note TEXT                  a timestamped note in the current window (shown in the report)
  stop                       stop sending, wait for the last replies, report, exit (EOF: same)
The first window is named by --first-event.

Per window it reports sent, lost (of which late: a reply came, after the timeout), wrong,
SERVFAIL, and the longest gap: per kind, the longest stretch of send time between two queries
with good answers (or the window's start or end) in which every query of that kind failed, i.e.
how long a client asking then would have seen nothing; 0 when none failed. For the window, the
worst kind's (cluster names answered by the kernel do not hide fresh names going unanswered).
The human table goes to stdout; --json writes
one JSON object per window and a total, --summary a flat table for shell scripts:
  WINDOW KIND SENT LOST WRONG SERVFAIL GAP_MS      (KIND: all, cluster, cached, fresh)
Python standard library only.
"""
import argparse
import collections
import errno
import ipaddress
import json
import os
import random
import select
import socket
import struct
import sys
import time

from dnsprobe import encode_name, read_name, recv_stamped, stamped_sockets

LATE_KEEP = 5.0

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}
TYPES = {"A": 1, "AAAA": 28}
KINDS = ("cluster", "cached", "fresh")
# Every 5 queries: 2 cluster, 2 cached, 1 fresh.
PATTERN = (0, 1, 0, 1, 2)

# (name, type, rcode, set of addresses): the sample cluster's records (records.ttl any).
CLUSTER = [
    ("kubernetes.default.svc.cluster.local", "A", 0, {"10.96.0.1"}),
    ("kube-dns.kube-system.svc.cluster.local", "A", 0, {"10.96.0.10"}),
    ("frontend.shop.svc.cluster.local", "A", 0, {"10.96.12.34"}),
    ("frontend.shop.svc.cluster.local", "AAAA", 0, {"fd00:10:96::1234"}),
    ("cart.shop.svc.cluster.local", "A", 0, {"10.96.12.50"}),
    ("prometheus.monitoring.svc.cluster.local", "A", 0, {"10.96.40.10"}),
    # A search-path name (ndots:5): NXDOMAIN from the node, never forwarded.
    ("www.example.com.default.svc.cluster.local", "A", 3, set()),
]
# External names: the first four are in tests/integration/lib.sh's unbound config; the rest come
# from unbound_data() below. stale-* have a 2 s TTL so that they expire while the upstream is
# down and must be served stale (RFC 8767).
CACHED = [
    ("www.example.com", "A", 0, {"192.0.2.10"}),
    ("www.example.com", "AAAA", 0, {"2001:db8::10"}),
    ("api.example.com", "A", 0, {"192.0.2.20"}),
    ("www.example.org", "A", 0, {"198.51.100.7"}),
]
EXTRA_CACHED = [("cached-%d.example.com" % i, 300, "192.0.2.%d" % (110 + i)) for i in range(8)]
EXTRA_CACHED += [("stale-%d.example.com" % i, 2, "192.0.2.%d" % (130 + i)) for i in range(4)]
CACHED += [(n, "A", 0, {a}) for n, _, a in EXTRA_CACHED]
FRESH_ZONE = "fresh.example.com"
FRESH_ADDR = "192.0.2.99"


def unbound_data():
    """Records for lib.sh's UNBOUND_EXTRA (each becomes a local-data line)."""
    return ["%s. %d IN A %s" % (n, ttl, a) for n, ttl, a in EXTRA_CACHED]


def unbound_zones():
    """unbound server: lines for the fresh names: a redirect zone answers every name under it
    with the apex's data, owned by the asked name (unbound's local-data has no wildcards)."""
    return ['local-zone: "%s." redirect' % FRESH_ZONE,
            'local-data: "%s. 300 IN A %s"' % (FRESH_ZONE, FRESH_ADDR)]


def check_reply(buf, q, servfail_ok):
    """(outcome, detail): outcome 'ok', 'servfail' (accepted) or 'wrong'."""
    name, qtype, rcode_want, want = q.expect
    if len(buf) < 12:
        return "wrong", "runt reply (%d bytes)" % len(buf)
    _, flags, qd, an, _, _ = struct.unpack_from("!HHHHHH", buf)
    if not flags & 0x8000:
        return "wrong", "QR clear"
    if (flags >> 11) & 15:
        return "wrong", "opcode %d" % ((flags >> 11) & 15)
    if flags & 0x0200:
        return "wrong", "TC set"
    rcode = flags & 15
    try:
        if qd != 1:
            return "wrong", "QDCOUNT %d" % qd
        qn, off = read_name(buf, 12)
        if off + 4 > len(buf):
            return "wrong", "question cut"
        rt, rc = struct.unpack_from("!HH", buf, off)
        off += 4
        if qn != name or rt != TYPES[qtype] or rc != 1:
            return "wrong", "question %s/%d/%d for %s/%s" % (qn, rt, rc, name, qtype)
        if rcode == 2 and q.kind == 2 and servfail_ok:
            return "servfail", ""
        if rcode != rcode_want:
            return "wrong", "%s %s: %s, want %s" % (name, qtype, RCODES.get(rcode, rcode),
                                                   RCODES.get(rcode_want, rcode_want))
        got = set()
        for _ in range(an):
            owner, off = read_name(buf, off)
            if off + 10 > len(buf):
                return "wrong", "answer cut"
            t, c, _, rdlen = struct.unpack_from("!HHIH", buf, off)
            off += 10
            if off + rdlen > len(buf):
                return "wrong", "rdata cut"
            if owner == name and c == 1 and t == TYPES[qtype]:
                got.add(str(ipaddress.ip_address(bytes(buf[off : off + rdlen]))))
            off += rdlen
    except (ValueError, KeyError) as e:
        return "wrong", "unparsable: %s" % e
    if got != want:
        return "wrong", "%s %s: %s, want %s" % (name, qtype, sorted(got) or "no records",
                                                sorted(want) or "no records")
    return "ok", ""


# A query lost at kill -9 was inside the process if it was sent this shortly before the kill
# completed: every answer here takes a few milliseconds, the upstream's included.
INPROC_S = 0.1


class Query:
    __slots__ = ("t", "kind", "expect", "sock", "qid", "window", "outcome")

    def __init__(self, t, kind, expect, sock, qid, window):
        self.t, self.kind, self.expect = t, kind, expect
        self.sock, self.qid, self.window, self.outcome = sock, qid, window, None


class Window:
    def __init__(self, name, servfail_ok, t):
        self.name, self.servfail_ok, self.start, self.end = name, servfail_ok, t, None
        self.queries = []
        self.notes = []
        self.wrong_examples = []
        self.late = 0
        self.killed = None  # when the test had kill -9'd the agent ("killed" command)

    def in_process(self, q):
        """Lost, and sent in the last INPROC_S before kill -9 completed: the query was inside
        the killed process (read from its socket, or waiting upstream) and nobody can answer it;
        the client's retry does. Reported apart from the other losses."""
        return (q.outcome == "lost" and self.killed is not None
                and self.killed - INPROC_S <= q.t <= self.killed)

    def stats(self, kind=None):
        qs = [q for q in self.queries if kind is None or q.kind == kind]
        c = collections.Counter("inproc" if self.in_process(q) else q.outcome for q in qs)
        # Longest stretch of send time without a good answer, window edges included. For the
        # whole window it is the worst kind's: a pod asking a fresh name sees nothing while
        # cluster names are still answered.
        if kind is None:
            kinds = [self.stats(k) for k in range(len(KINDS))]
            worst = max(kinds, key=lambda k: k["gap_ms"])
            gap_ms, gap_from = worst["gap_ms"], worst["gap_from_s"]
        else:
            # Only stretches with a failed query count: a prober that could not send for a
            # while (descheduled) has no evidence of an outage.
            last, gap, gap_at, failed = self.start, 0.0, self.start, False
            for q in qs:
                if q.outcome not in ("ok", "servfail") and not self.in_process(q):
                    failed = True
                    continue
                if failed and q.t - last > gap:
                    gap, gap_at = q.t - last, last
                last, failed = q.t, False
            if failed and self.end - last > gap:
                gap, gap_at = self.end - last, last
            gap_ms, gap_from = round(gap * 1000, 1), round(gap_at - self.start, 3)
        return {
            "sent": len(qs),
            "ok": c["ok"],
            "lost": c["lost"],
            "wrong": c["wrong"],
            "servfail": c["servfail"],
            "gap_ms": gap_ms,
            "gap_from_s": gap_from,
            "inproc": c["inproc"],
        }


def probe(args):
    rng = random.SystemRandom()
    server = (args.server, args.port)
    socks, fd_index, poller = stamped_sockets(args.sockets)
    stdin_fd = sys.stdin.fileno()
    os.set_blocking(stdin_fd, False)
    poller.register(stdin_fd, select.POLLIN | select.POLLHUP)

    token = "%08x" % rng.getrandbits(32)
    tables = (CLUSTER, CACHED, None)
    pending = {}  # (socket index, id) -> Query
    inflight = collections.deque()  # in send order, for expiry
    # Queries past their timeout, kept LATE_KEEP seconds more to tell late replies from strays.
    expired = {}
    expired_order = collections.deque()
    windows = [Window(args.first_event, False, time.time())]
    stray = unsent = 0
    max_lag = 0.0
    stdin_buf = b""
    stopping = False
    t0 = time.monotonic()
    wall0 = time.time()
    sent = 0
    counter = 0
    grace = 0.05  # expiry waits this long past the timeout for replies still in flight

    def command(line):
        nonlocal stopping
        w = windows[-1]
        parts = line.split(None, 1)
        if not parts:
            return
        now = time.time()
        if parts[0] == "event" and len(parts) == 2:
            fields = parts[1].split()
            w.end = now
            windows.append(Window(fields[0], "servfail-ok" in fields[1:], now))
        elif parts[0] == "killed":
            w.killed = now
            w.notes.append((round(now - w.start, 3), "kill -9 done"))
        elif parts[0] == "note":
            w.notes.append((round(now - w.start, 3), parts[1] if len(parts) > 1 else ""))
        elif parts[0] == "stop":
            stopping = True
        else:
            print("prober: unknown command %r" % line, file=sys.stderr)

    def receive(i):
        nonlocal stray
        s = socks[i]
        while True:
            try:
                data, addr, rx = recv_stamped(s)
            except BlockingIOError:
                return
            except OSError as e:  # ICMP errors are not reported on unconnected sockets
                if e.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH):
                    continue
                raise
            key = (i, int.from_bytes(data[:2], "big")) if len(data) >= 2 else None
            q = pending.get(key)
            if q is None:
                late = expired.pop(key, None)
                if late is not None:
                    late.window.late += 1  # already counted lost
                else:
                    stray += 1  # a duplicate, or not an answer to us
                continue
            del pending[(i, q.qid)]
            w = q.window
            if rx - q.t > args.timeout:
                q.outcome = "lost"
                w.late += 1
                continue
            if addr[0] != args.server or addr[1] != args.port:
                q.outcome = "wrong"
                detail = "%s %s: reply from %s:%d" % (q.expect[0], q.expect[1], addr[0], addr[1])
            else:
                q.outcome, detail = check_reply(data, q, w.servfail_ok)
            if q.outcome == "wrong" and len(w.wrong_examples) < 5:
                w.wrong_examples.append("+%.3f s %s" % (q.t - w.start, detail))

    while True:
        now_m = time.monotonic()
        if not stopping:
            due = int((now_m - t0) * args.rate)
            lag = (due - sent) / args.rate
            if lag > max_lag:
                max_lag = lag
            burst = 0
            w = windows[-1]
            while sent < due and burst < 512:
                kind = PATTERN[counter % len(PATTERN)]
                counter += 1
                if kind == 2:
                    name = "%s-%d.%s" % (token, counter, FRESH_ZONE)
                    expect = (name, "A", 0, {FRESH_ADDR})
                else:
                    expect = tables[kind][(counter // len(PATTERN)) % len(tables[kind])]
                si = sent % len(socks)
                qid = rng.getrandbits(16)
                while (si, qid) in pending or (si, qid) in expired:
                    qid = rng.getrandbits(16)
                wire = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + encode_name(
                    expect[0]) + struct.pack("!HH", TYPES[expect[1]], 1)
                t = time.time()
                q = Query(t, kind, expect, si, qid, w)
                try:
                    socks[si].sendto(wire, server)
                except OSError:
                    unsent += 1
                    sent += 1
                    burst += 1
                    continue
                pending[(si, qid)] = q
                inflight.append(q)
                w.queries.append(q)
                sent += 1
                burst += 1
            wait_ms = max(0, min(10, int((sent + 1 - (now_m - t0) * args.rate) / args.rate * 1000)))
        else:
            wait_ms = 10
            if not pending:
                break
        for fd, ev in poller.poll(wait_ms):
            if fd == stdin_fd:
                try:
                    chunk = os.read(stdin_fd, 4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    poller.unregister(stdin_fd)
                    stopping = True
                    if windows[-1].end is None:
                        windows[-1].end = time.time()
                    continue
                stdin_buf += chunk
                while b"\n" in stdin_buf:
                    line, stdin_buf = stdin_buf.split(b"\n", 1)
                    command(line.decode(errors="replace").strip())
                if stopping and windows[-1].end is None:
                    windows[-1].end = time.time()
            else:
                receive(fd_index[fd])
        # Expire after draining the sockets: a reply already queued is not counted lost.
        now = time.time()
        limit = now - args.timeout - grace
        while inflight and inflight[0].t < limit:
            q = inflight.popleft()
            if q.outcome is None:
                q.outcome = "lost"
                del pending[(q.sock, q.qid)]
                expired[(q.sock, q.qid)] = q
                expired_order.append(q)
        while expired_order and expired_order[0].t < limit - LATE_KEEP:
            q = expired_order.popleft()
            if expired.get((q.sock, q.qid)) is q:
                del expired[(q.sock, q.qid)]
    if windows[-1].end is None:
        windows[-1].end = time.time()
    report(args, windows, sent, unsent, stray, max_lag, wall0)


def lost_examples(w, n=5):
    """The first N lost queries of a window: when (send time in the window) and what."""
    out = []
    for q in w.queries:
        if q.outcome == "lost":
            out.append("+%.3f s %s %s (%s)" % (q.t - w.start, q.expect[0], q.expect[1],
                                              KINDS[q.kind]))
            if len(out) == n:
                break
    return out


def report(args, windows, sent, unsent, stray, max_lag, wall0):
    # From the first query to "stop", without the wait for the last replies.
    elapsed = windows[-1].end - windows[0].start
    rows = []
    jl = []
    flat = []
    totals = collections.Counter()
    for w in windows:
        st = w.stats()
        kinds = {KINDS[k]: w.stats(k) for k in range(3)}
        for k in ("sent", "lost", "wrong", "servfail"):
            totals[k] += st[k]
        dur = w.end - w.start
        rec = dict(event=w.name, servfail_ok=w.servfail_ok, duration_s=round(dur, 3),
                   start_s=round(w.start - wall0, 3), late=w.late, **st, kinds=kinds,
                   notes=w.notes, wrong_examples=w.wrong_examples,
                   lost_examples=lost_examples(w))
        jl.append(rec)
        rows.append(rec)
        flat.append("%s all %d %d %d %d %.1f %d" % (w.name, st["sent"], st["lost"], st["wrong"],
                                                    st["servfail"], st["gap_ms"], st["inproc"]))
        for k, ks in kinds.items():
            flat.append("%s %s %d %d %d %d %.1f %d" % (w.name, k, ks["sent"], ks["lost"],
                                                       ks["wrong"], ks["servfail"], ks["gap_ms"],
                                                       ks["inproc"]))
    total = dict(event="total", sent=totals["sent"], lost=totals["lost"], wrong=totals["wrong"],
                 servfail=totals["servfail"], unsent=unsent, stray=stray,
                 rate_target=args.rate, rate_achieved=round(sent / elapsed, 1) if elapsed else 0,
                 max_send_lag_ms=round(max_lag * 1000, 1), duration_s=round(elapsed, 3))
    jl.append(total)
    flat.append("total all %d %d %d %d 0" % (totals["sent"], totals["lost"], totals["wrong"],
                                             totals["servfail"]))
    flat.append("rate achieved %.1f target %d unsent %d max_lag_ms %.1f" % (
        total["rate_achieved"], args.rate, unsent, total["max_send_lag_ms"]))
    if args.json:
        with open(args.json, "w") as f:
            for r in jl:
                f.write(json.dumps(r) + "\n")
    if args.summary:
        with open(args.summary, "w") as f:
            f.write("\n".join(flat) + "\n")

    print("%-20s %7s %8s %7s %5s %6s %8s %8s  %-14s %s" % (
        "event", "seconds", "sent", "lost", "late", "wrong", "SERVFAIL", "gap ms", "lost by kind",
        "gap ms by kind (cluster/cached/fresh)"))
    for r in rows:
        k = [r["kinds"][n] for n in KINDS]
        print("%-20s %7.1f %8d %7d %5d %6d %8d %8.1f  %-14s %s" % (
            r["event"], r["duration_s"], r["sent"], r["lost"], r["late"], r["wrong"], r["servfail"],
            r["gap_ms"], "/".join(str(x["lost"]) for x in k),
            "/".join("%.0f" % x["gap_ms"] for x in k)))
        if r["gap_ms"] >= 100:
            print("%-20s   longest gap from +%.2f s" % ("", r["gap_from_s"]))
        for t, text in r["notes"]:
            print("%-20s   +%6.2f s  %s" % ("", t, text))
        if 0 < r["lost"] <= 20:
            for e in r["lost_examples"]:
                print("%-20s   lost: %s" % ("", e))
        for e in r["wrong_examples"]:
            print("%-20s   wrong: %s" % ("", e))
    print("%-20s %7.1f %8d %7d %5s %6d %8d" % ("total", elapsed, totals["sent"], totals["lost"],
                                                "", totals["wrong"], totals["servfail"]))
    print("rate: %.0f queries/s achieved of %d asked; longest send lag %.1f ms; %d not sent; "
          "%d stray or late replies" % (total["rate_achieved"], args.rate,
                                        total["max_send_lag_ms"], unsent, stray))
    sys.stdout.flush()


def garbage_packets(rng):
    """Malformed or unwelcome datagrams, cycling through the kinds of issue 10, item 5."""
    def hdr(qid=None, flags=0x0100, qd=1, an=0, ns=0, ar=0):
        return struct.pack("!HHHHHH", rng.getrandbits(16) if qid is None else qid, flags,
                           qd, an, ns, ar)
    q_kube = encode_name("kubernetes.default.svc.cluster.local") + b"\x00\x01\x00\x01"
    q_www = encode_name("www.example.com") + b"\x00\x01\x00\x01"

    def random_bytes():
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 600)))

    def runt():
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 11)))

    def lying_counts():
        return hdr(qd=rng.choice([0, 2, 7, 65535]), an=rng.getrandbits(16),
                   ns=rng.getrandbits(16), ar=rng.getrandbits(16)) + q_kube

    def response():
        # QR=1, AA: a poisoning attempt for names the prober asks (a cache must drop it).
        name = rng.choice([q_www, q_kube])
        return (hdr(flags=0x8580, an=1) + name + b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x0e\x10"
                b"\x00\x04" + bytes([203, 0, 113, rng.getrandbits(8)]))

    def opcode():
        op = rng.randint(0, 15)
        if op == 0:  # opcode 0 with a question is a real query: break the question instead
            return hdr(qd=1) + b"\x05ab"
        return hdr(flags=(op << 11) | 0x0100) + q_kube

    def compression_loop():
        return rng.choice([
            hdr() + b"\xc0\x0c\x00\x01\x00\x01",                  # points at itself
            hdr() + b"\x01a\xc0\x0e\x00\x01\x00\x01",            # a -> pointer to a
            hdr() + b"\xc0\x0e\xc0\x0c\x00\x01\x00\x01",         # two pointers, each to the other
            hdr() + b"\xc0\xff\x00\x01\x00\x01",                  # past the end
            hdr() + b"\xc0\x02\x00\x01\x00\x01",                  # into the header
        ])

    def oversized_name():
        if rng.random() < 0.5:
            name = b"".join(b"\x3f" + b"x" * 63 for _ in range(5)) + b"\x00"  # 320 bytes
        else:
            name = bytes([rng.choice([0x40, 0x7f, 0x80, 0xbf])]) + b"abc\x00"  # reserved types
        return hdr() + name + b"\x00\x01\x00\x01"

    def edns_absurd():
        opt_len = rng.choice([65535, 4000, 7])
        return (hdr(ar=1) + q_kube + b"\x00\x00\x29\x10\x00\x00\x00\x00\x00" +
                struct.pack("!H", rng.choice([65535, 12, 4])) +
                struct.pack("!HH", rng.choice([8, 10, 12, 65001]), opt_len) + b"\x00" * 4)

    def trailing_and_zero_labels():
        return hdr() + b"\x03a\x00b\x03c\x00d\x00\x00\x01\x00\x01" + random_bytes()[:40]

    kinds = [random_bytes, runt, lying_counts, response, opcode, compression_loop,
             oversized_name, edns_absurd, trailing_and_zero_labels]
    i = 0
    while True:
        yield kinds[i % len(kinds)]()
        i += 1


def garbage(args):
    rng = random.Random(args.seed)
    socks = []
    for _ in range(8):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        s.bind(("0.0.0.0", 0))
        socks.append(s)
    gen = garbage_packets(rng)
    t0 = time.monotonic()
    sent = failed = 0
    while sent + failed < args.count:
        due = min(args.count, int((time.monotonic() - t0) * args.rate) + 1)
        while sent + failed < due:
            try:
                socks[(sent + failed) % len(socks)].sendto(next(gen), (args.server, args.port))
                sent += 1
            except OSError:
                failed += 1
        for s in socks:  # replies (FORMERR, NOTIMP...) are read and dropped
            try:
                while s.recv(4096):
                    pass
            except OSError:
                pass
        time.sleep(0.005)
    print("garbage: %d datagrams sent in %.1f s, %d failed to send" % (
        sent, time.monotonic() - t0, failed))
    return 0 if failed == 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe")
    p.add_argument("--server", default="169.254.20.10")
    p.add_argument("--port", type=int, default=53)
    p.add_argument("--rate", type=int, default=1000, help="queries per second (default 1000)")
    p.add_argument("--timeout", type=float, default=1.0, help="seconds (default 1)")
    p.add_argument("--sockets", type=int, default=64)
    p.add_argument("--first-event", default="start")
    p.add_argument("--json", help="write JSON lines here")
    p.add_argument("--summary", help="write the flat table here")
    g = sub.add_parser("garbage")
    g.add_argument("--server", default="169.254.20.10")
    g.add_argument("--port", type=int, default=53)
    g.add_argument("--count", type=int, default=20000)
    g.add_argument("--rate", type=int, default=4000)
    g.add_argument("--seed", type=int, default=10)
    sub.add_parser("unbound-data")
    sub.add_parser("unbound-zones")
    sub.add_parser("warm-names")
    args = ap.parse_args()
    if args.cmd == "probe":
        if args.rate < 1 or args.sockets < 1 or args.timeout <= 0:
            ap.error("rate, sockets and timeout must be positive")
        probe(args)
        return 0
    if args.cmd == "garbage":
        return garbage(args)
    if args.cmd == "unbound-data":
        print("\n".join(unbound_data()))
        return 0
    if args.cmd == "unbound-zones":
        print("\n".join(unbound_zones()))
        return 0
    for name, qtype, _, want in CACHED:
        print(name, qtype, ",".join(sorted(want)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
