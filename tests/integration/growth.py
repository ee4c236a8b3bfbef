#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Growth and shrink of the kernel's answer table under traffic (issue 21), for test_growth.sh.

  growth.py objects --services N --batches B --out DIR
      the services added on top of the sample cluster, as gen_k8s_scale.py makes them (one
      EndpointSlice each, every 5th headless): DIR/namespaces.json, DIR/batch-K.json (Lists for
      the fake API server's op apply), DIR/delete.txt ("KIND NAMESPACE NAME", services and slices
      first, namespaces last) and DIR/dyn.txt (the prober's questions about them, with answers)
  growth.py push --port P apply FILE... | delete FILE
      POSTs them to the fake API server's control port over one kept-alive connection
  growth.py probe [options]
      asks --server at --rate queries/s the sample cluster's names (they exist throughout) and,
      when told so on stdin, --dyn-rate queries/s about the added services; checks every reply

Every reply is checked whole: header (QR, opcode, TC), question, rcode and the answer section as a
set of (owner, type, rdata), against the expected one. LOST: no reply within --timeout (the
kernel's receive timestamp decides). WRONG: anything else than the expected reply.

The added services' names change under the prober, so what is right for them depends on the
phase, set on stdin ("dyn MODE", one command a line):
  dyn lenient   just added or being deleted: the full answer, NXDOMAIN, or NODATA (a headless
                service whose EndpointSlice is not there yet) are right; any other records wrong
  dyn present   the table has them: only the full answer is right
  dyn absent    deleted and settled: only NXDOMAIN is right
  dyn off       no questions about them (the default)
  phase NAME    a new reporting window; stop: finish, report, exit (EOF: same)
Output: a table per phase, then "total sent lost wrong" and, with --summary FILE, that line and
one per phase ("PHASE sent lost wrong dyn_sent dyn_absent") in FILE. Python standard library only.
"""
import argparse
import collections
import http.client
import ipaddress
import json
import os
import random
import select
import struct
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "bench"))
import gen_k8s_scale as gen  # noqa: E402
from dnsprobe import encode_name, read_name, recv_stamped, stamped_sockets  # noqa: E402

ZONE = "cluster.local"
TYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "AAAA": 28, "SRV": 33}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
RCODES = {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}


def svc(name):
    return "%s.svc.%s" % (name, ZONE)


# The names that exist throughout, from deploy/examples/sample-cluster.json, with the answers the
# Kubernetes DNS specification gives them: (name, type, rcode, {(owner, type, rdata)}).
def sample_expectations():
    out = []

    def a(name, qtype, *rdata, owner=None):
        out.append((name, qtype, 0, frozenset((owner or name, qtype, r) for r in rdata)))

    k8s, dns = svc("kubernetes.default"), svc("kube-dns.kube-system")
    front, cart = svc("frontend.shop"), svc("cart.shop")
    pg, cache = svc("postgres.data"), svc("cache.data")
    a(k8s, "A", "10.96.0.1")
    a(k8s, "AAAA")  # NODATA: a single-stack IPv4 service
    a(dns, "A", "10.96.0.10")
    a(front, "A", "10.96.12.34")
    a(front, "AAAA", "fd00:10:96::1234")
    a(cart, "A", "10.96.12.50")
    a(cart, "AAAA")
    a(svc("checkout.shop"), "A", "10.96.12.60")
    a(svc("postgres-rw.data"), "A", "10.96.30.5")
    a(svc("prometheus.monitoring"), "A", "10.96.40.10")
    a(svc("grafana.monitoring"), "A", "10.96.40.20")
    # headless: the ready endpoints (postgres-2 is not ready)
    a(pg, "A", "10.244.1.40", "10.244.2.41")
    a(pg, "AAAA")
    a("postgres-0." + pg, "A", "10.244.1.40")
    a(cache, "A", "10.244.1.60", "10.244.2.61")
    a(svc("shop"), "A")  # a namespace: NODATA
    # SRV of named ports: a ClusterIP service's points at the service, a headless one's at each
    # endpoint with a hostname
    a("_https._tcp." + k8s, "SRV", "0 100 443 %s." % k8s)
    a("_dns._udp." + dns, "SRV", "0 100 53 %s." % dns)
    a("_grpc._tcp." + cart, "SRV", "0 100 50051 %s." % cart)
    a("_pg._tcp." + pg, "SRV", "0 50 5432 postgres-0.%s." % pg, "0 50 5432 postgres-1.%s." % pg)
    out.append((svc("nosuch.shop"), "A", 3, frozenset()))
    out.append((svc("nosuch.shop"), "AAAA", 3, frozenset()))
    return out


# ---- objects -------------------------------------------------------------------------------------


def objects(args):
    os.makedirs(args.out, exist_ok=True)
    nss = sorted({gen.ns_name(i, args.namespaces) for i in range(1, args.services + 1)})
    nss = [n for n in nss if n != "default"]  # the sample's, kept
    with open(os.path.join(args.out, "namespaces.json"), "w") as f:
        json.dump({"kind": "List", "items": [gen.namespace(n) for n in nss]}, f)
    per = (args.services + args.batches - 1) // args.batches
    deletes, dyn = [], []
    for b in range(args.batches):
        items = []
        for i in range(1 + b * per, min(args.services, (b + 1) * per) + 1):
            ns, name, cip, _ = gen.svc_ident(i, args.namespaces)
            items.append(gen.service(ns, name, cip))
            items.append(gen.endpoint_slice(i, ns, name, cip is None, args.endpoints))
            deletes.append("Service %s %s" % (ns, name))
            deletes.append("EndpointSlice %s %s-abcde" % (ns, name))
            if i % args.dyn_every:
                continue
            fq = svc("%s.%s" % (name, ns))
            ips = gen.endpoint_ips(i, args.endpoints) if cip is None else [cip]
            dyn.append("%s A %s" % (fq, ",".join(ips)))
            dyn.append("%s AAAA -" % fq)
            if cip is not None:
                dyn.append("_http._tcp.%s SRV 0_100_80_%s." % (fq, fq))
        with open(os.path.join(args.out, "batch-%d.json" % b), "w") as f:
            json.dump({"kind": "List", "items": items}, f, separators=(",", ":"))
    deletes += ["Namespace - %s" % n for n in nss]
    with open(os.path.join(args.out, "delete.txt"), "w") as f:
        f.write("\n".join(deletes) + "\n")
    with open(os.path.join(args.out, "dyn.txt"), "w") as f:
        f.write("\n".join(dyn) + "\n")
    print("services=%d batches=%d namespaces=%d objects=%d dyn_questions=%d" % (
        args.services, args.batches, len(nss), len(deletes), len(dyn)))
    return 0


def push(args):
    c = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)

    def post(req):
        c.request("POST", "/control", json.dumps(req), {"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError("control %s: %d %s" % (req.get("op"), r.status, body[:200]))

    t0 = time.monotonic()
    n = 0
    if args.op == "apply":
        for path in args.files:
            with open(path) as f:
                doc = json.load(f)
            post({"op": "apply", "object": doc})
            n += len(doc["items"])
    else:
        with open(args.files[0]) as f:
            for line in f:
                kind, ns, name = line.split()
                post({"op": "delete", "kind": kind, "namespace": "" if ns == "-" else ns,
                      "name": name})
                n += 1
    print("%s: %d objects in %.1f s" % (args.op, n, time.monotonic() - t0))
    return 0


# ---- probe ---------------------------------------------------------------------------------------


def rdata_text(buf, off, t, rdlen):
    rd = bytes(buf[off:off + rdlen])
    if t in (1, 28):
        return str(ipaddress.ip_address(rd))
    if t == 33:
        if rdlen < 7:
            raise ValueError("SRV rdata cut")
        prio, weight, port = struct.unpack_from("!HHH", buf, off)
        target, _ = read_name(buf, off + 6)
        return "%d %d %d %s." % (prio, weight, port, target)
    if t in (5, 12, 2):
        return read_name(buf, off)[0] + "."
    return rd.hex()


def parse_reply(buf, name, qtype):
    """(rcode, frozenset of answers) or raises ValueError naming what is wrong."""
    if len(buf) < 12:
        raise ValueError("runt reply (%d bytes)" % len(buf))
    _, flags, qd, an, _, _ = struct.unpack_from("!HHHHHH", buf)
    if not flags & 0x8000 or (flags >> 11) & 15 or flags & 0x0200:
        raise ValueError("flags %04x (QR clear, an opcode or TC)" % flags)
    if qd != 1:
        raise ValueError("QDCOUNT %d" % qd)
    qn, off = read_name(buf, 12)
    if off + 4 > len(buf):
        raise ValueError("question cut")
    rt, rc = struct.unpack_from("!HH", buf, off)
    off += 4
    if qn != name or rt != TYPES[qtype] or rc != 1:
        raise ValueError("question %s/%d/%d" % (qn, rt, rc))
    got = set()
    for _ in range(an):
        owner, off = read_name(buf, off)
        if off + 10 > len(buf):
            raise ValueError("answer cut")
        t, c, _, rdlen = struct.unpack_from("!HHIH", buf, off)
        off += 10
        if off + rdlen > len(buf) or c != 1:
            raise ValueError("rdata cut or class %d" % c)
        got.add((owner, TYPE_NAMES.get(t, str(t)), rdata_text(buf, off, t, rdlen)))
        off += rdlen
    return flags & 15, frozenset(got)


def load_dyn(path):
    out = []
    with open(path) as f:
        for line in f:
            name, qtype, answers = line.split()
            rd = [] if answers == "-" else [r.replace("_", " ") for r in answers.split(",")]
            out.append((name, qtype, 0, frozenset((name, qtype, r) for r in rd)))
    return out


def show(ans):
    return ", ".join(sorted("%s %s %s" % x for x in ans)) or "no records"


class Phase:
    def __init__(self, name, t):
        self.name, self.start, self.end = name, t, None
        self.c = collections.Counter()
        self.examples = []

    def add(self, outcome, dyn, detail=None):
        self.c[outcome] += 1
        self.c[("dyn-" if dyn else "") + "sent"] += 1
        if dyn:
            self.c["dyn-" + outcome] += 1
        if detail and len(self.examples) < 8:
            self.examples.append("+%.2f s %s" % (time.time() - self.start, detail))


def probe(args):
    static = sample_expectations()
    dyn = load_dyn(args.dyn) if args.dyn else []
    rng = random.SystemRandom()
    server = (args.server, 53)
    socks, fd_index, poller = stamped_sockets(args.sockets)
    stdin_fd = sys.stdin.fileno()
    os.set_blocking(stdin_fd, False)
    poller.register(stdin_fd, select.POLLIN | select.POLLHUP)

    phases = [Phase("start", time.time())]
    pending = {}  # (socket, id) -> (send time, expectation, mode or None, phase)
    order = collections.deque()  # (send time, key), for expiry
    mode = "off"
    stopping = False
    buf = b""
    t0 = time.monotonic()
    sent_s = sent_d = 0
    dyn_t0, dyn_base = t0, 0
    unsent = late = 0

    def command(line):
        nonlocal mode, stopping, dyn_t0, dyn_base
        parts = line.split()
        if not parts:
            return
        if parts[0] == "dyn" and len(parts) == 2 and parts[1] in (
                "off", "lenient", "present", "absent"):
            if mode == "off" and parts[1] != "off":
                dyn_t0, dyn_base = time.monotonic(), sent_d
            mode = parts[1]
        elif parts[0] == "phase" and len(parts) == 2:
            phases[-1].end = time.time()
            phases.append(Phase(parts[1], time.time()))
        elif parts[0] == "stop":
            stopping = True
        else:
            print("growth prober: unknown command %r" % line, file=sys.stderr)

    def judge(data, exp, m):
        """(outcome, detail): outcome ok, wrong or absent (a dynamic name not there yet)."""
        name, qtype, rcode_want, want = exp
        try:
            rcode, got = parse_reply(data, name, qtype)
        except ValueError as e:
            return "wrong", "%s %s: %s" % (name, qtype, e)
        if rcode == rcode_want and got == want and m != "absent":
            return "ok", None
        if m == "absent" and rcode == 3 and not got:
            return "ok", None
        if m == "lenient" and not got and rcode in (0, 3):
            return "absent", None
        return "wrong", "%s %s [%s]: %s %s, want %s %s" % (
            name, qtype, m or "sample", RCODES.get(rcode, rcode), show(got),
            "NXDOMAIN" if m == "absent" else RCODES.get(rcode_want, rcode_want),
            "" if m == "absent" else show(want))

    def send(exp, m):
        nonlocal unsent
        i = rng.randrange(len(socks))
        qid = rng.getrandbits(16)
        while (i, qid) in pending:
            qid = rng.getrandbits(16)
        wire = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + encode_name(exp[0]) + \
            struct.pack("!HH", TYPES[exp[1]], 1)
        t = time.time()
        try:
            socks[i].sendto(wire, server)
        except OSError:
            unsent += 1
            phases[-1].add("lost", m is not None, "%s %s: send failed" % exp[:2])
            return
        pending[(i, qid)] = (t, exp, m, phases[-1])
        order.append((t, (i, qid)))

    def receive(i):
        nonlocal late
        while True:
            try:
                data, addr, rx = recv_stamped(socks[i])
            except BlockingIOError:
                return
            except OSError:
                continue  # an ICMP error: the query is counted lost when it expires
            key = (i, int.from_bytes(data[:2], "big")) if len(data) >= 2 else None
            q = pending.pop(key, None)
            if q is None:
                late += 1  # after its timeout (already counted lost), or a stray
                continue
            t, exp, m, ph = q
            if rx - t > args.timeout:
                ph.add("lost", m is not None, "%s %s: answered after %.2f s" % (
                    exp[0], exp[1], rx - t))
                continue
            if addr != server:
                ph.add("wrong", m is not None, "%s %s: reply from %s" % (exp[0], exp[1], addr))
                continue
            outcome, detail = judge(data, exp, m)
            ph.add(outcome, m is not None, detail)

    while True:
        now_m = time.monotonic()
        if not stopping:
            due = int((now_m - t0) * args.rate)
            burst = 0
            while sent_s < due and burst < 256:
                send(static[sent_s % len(static)], None)
                sent_s += 1
                burst += 1
            if mode != "off" and dyn:
                due = dyn_base + int((now_m - dyn_t0) * args.dyn_rate)
                while sent_d < due and burst < 512:
                    send(dyn[sent_d % len(dyn)], mode)
                    sent_d += 1
                    burst += 1
            wait_ms = 1
        else:
            wait_ms = 10
            if not pending:
                break
        for fd, _ in poller.poll(wait_ms):
            if fd == stdin_fd:
                try:
                    chunk = os.read(stdin_fd, 4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    poller.unregister(stdin_fd)
                    stopping = True
                    continue
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    command(line.decode(errors="replace").strip())
            else:
                receive(fd_index[fd])
        limit = time.time() - args.timeout - 0.05
        while order and order[0][0] < limit:
            _, key = order.popleft()
            q = pending.pop(key, None)
            if q is not None:
                t, exp, m, ph = q
                ph.add("lost", m is not None, "%s %s: no reply" % (exp[0], exp[1]))
    phases[-1].end = time.time()
    return report(args, phases, unsent, late, time.monotonic() - t0)


def report(args, phases, unsent, late, elapsed):
    print("%-12s %7s %8s %6s %6s %9s %9s %9s" % (
        "phase", "seconds", "sent", "lost", "wrong", "dyn sent", "dyn lost", "dyn absent"))
    tot = collections.Counter()
    lines = []
    for p in phases:
        c = p.c
        tot.update(c)
        print("%-12s %7.1f %8d %6d %6d %9d %9d %9d" % (
            p.name, p.end - p.start, c["sent"] + c["dyn-sent"], c["lost"], c["wrong"],
            c["dyn-sent"], c["dyn-lost"], c["dyn-absent"]))
        for e in p.examples:
            print("%-12s   %s" % ("", e))
        lines.append("%s %d %d %d %d %d" % (p.name, c["sent"] + c["dyn-sent"], c["lost"],
                                           c["wrong"], c["dyn-sent"], c["dyn-absent"]))
    sent = tot["sent"] + tot["dyn-sent"]
    print("total: %d sent (%d about the sample's names, %.0f/s), %d lost, %d wrong, %d absent "
          "while being added or deleted; %d late or stray replies; %d not sent" % (
              sent, tot["sent"], tot["sent"] / elapsed if elapsed else 0, tot["lost"],
              tot["wrong"], tot["dyn-absent"], late, unsent))
    if args.summary:
        with open(args.summary, "w") as f:
            f.write("total %d %d %d %d %d %.1f\n" % (sent, tot["lost"], tot["wrong"],
                                                    tot["dyn-sent"], tot["dyn-absent"],
                                                    tot["sent"] / elapsed if elapsed else 0))
            f.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("objects")
    o.add_argument("--services", type=int, default=10000)
    o.add_argument("--namespaces", type=int, default=200)
    o.add_argument("--endpoints", type=int, default=3)
    o.add_argument("--batches", type=int, default=4)
    o.add_argument("--dyn-every", type=int, default=7, help="ask about every Nth service")
    o.add_argument("--out", required=True)
    p = sub.add_parser("push")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("op", choices=("apply", "delete"))
    p.add_argument("files", nargs="+")
    q = sub.add_parser("probe")
    q.add_argument("--server", default="169.254.20.10")
    q.add_argument("--rate", type=int, default=1000, help="sample names per second")
    q.add_argument("--dyn-rate", type=int, default=200, help="added names per second")
    q.add_argument("--dyn", help="dyn.txt from objects")
    q.add_argument("--timeout", type=float, default=1.0)
    q.add_argument("--sockets", type=int, default=32)
    q.add_argument("--summary")
    a = ap.parse_args()
    if a.cmd == "objects":
        if a.services < 1 or a.batches < 1 or a.dyn_every < 1:
            ap.error("--services, --batches and --dyn-every must be at least 1")
        return objects(a)
    if a.cmd == "push":
        return push(a)
    if a.rate < 1 or a.dyn_rate < 1 or a.timeout <= 0 or a.sockets < 1:
        ap.error("rates, timeout and sockets must be positive")
    return probe(a)


if __name__ == "__main__":
    sys.exit(main())
