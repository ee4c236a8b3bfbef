#!/usr/bin/env python3
"""ndcache against a reference resolver (unbound) on the same authoritative upstream (knotd).

Asks every question (names x types x EDNS/plain) of ndcache twice and of unbound once over UDP,
and of knotd over TCP (the zone's records and TTLs in full, untruncated), decodes the replies
with dnspython (a decoder that is not ours) and compares:
  first:  ndcache's first answer with unbound's,
  cached: ndcache's second answer (from its kernel table or cache) with its first,
on rcode, TC, the answer section's RRsets as sets (owner, type, class, rdata; TTLs ignored except
that ndcache's must not exceed the zone's), and the authority section's types. A difference that
is not one of the classes below (each a narrow predicate, each documented in docs/ANSWERS.md with
the RFC that allows it) fails the run.

Usage:
  reference.py compare --ndcache ADDR --unbound ADDR --knot ADDR --zone ZONE [--metrics-before N
                       --metrics-cmd ...]   prints the figures; exit 1 on an unlisted difference
  reference.py probe --server ADDR --zone ZONE   prints what a server answers to reserved and meta
                       types and to classes other than IN (for the report)
"""
import argparse
import os
import socket
import subprocess
import sys
import time

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

# The zone's names (relative to --zone; "@" is the apex), as the test's zone file has them.
NAMES = [
    "@", "ns", "www", "mail", "alias", "chain", "dangling", "nodata-alias", "old", "www.old",
    "gone.old", "x.wild", "a.b.wild", "wild", "big", "huge", "svc", "_sip._tcp", "_tcp", "host",
    "unk", "zero", "nosuch", "a.b.nosuch", "wc-alias", "ext",
]
TYPES = ["A", "AAAA", "CNAME", "DNAME", "MX", "TXT", "SRV", "SOA", "NS", "CAA", "HTTPS", "SVCB",
         "PTR", "TYPE65400", "TYPE65401", "ANY", "TYPE0"]

# Reserved and meta question types (RFC 6895 3.1: 0 reserved, 41 OPT is a pseudo-RR, 128-255
# meta types and QTYPEs; ANY=255 is answered per RFC 8482).
RESERVED = {0, 41} | set(range(128, 255))
# What ndcache answers them itself (docs/ANSWERS.md "Question hygiene", issue 38 item 1): the
# class reserved-qtype holds only where ndcache gives one of these with an empty answer, never the
# upstream's relayed answer. NDC_REF_RESERVED_RCODES=... in the environment sets it for one run.
NDCACHE_RESERVED_RCODES = {dns.rcode.FORMERR, dns.rcode.REFUSED}

TIMEOUT = 2.0
ZONE = dns.name.root  # set from --zone


def rtype(t):
    return dns.rdatatype.from_text(t)


def ask_udp(addr, name, qtype, edns, rdclass=dns.rdataclass.IN):
    """One UDP question; the decoded reply, or None after TIMEOUT (no retry: a lost reply is a
    difference like any other)."""
    q = dns.message.make_query(name, qtype, rdclass, use_edns=0 if edns else False, payload=1232)
    wire = q.to_wire()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.settimeout(TIMEOUT)
        s.connect((addr, 53))
        s.send(wire)
        end = time.monotonic() + TIMEOUT
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            s.settimeout(left)
            try:
                data = s.recv(65535)
            except socket.timeout:
                return None
            if len(data) < 2 or data[:2] != wire[:2]:
                continue
            try:
                return dns.message.from_wire(data, ignore_trailing=True)
            except dns.message.Truncated as e:
                return e.message()
            except Exception as e:  # a reply dnspython cannot decode: a difference in itself
                return "undecodable: %s" % e
    finally:
        s.close()


def ask_tcp(addr, name, qtype):
    q = dns.message.make_query(name, qtype, use_edns=0, payload=1232)
    wire = q.to_wire()
    with socket.create_connection((addr, 53), timeout=TIMEOUT) as s:
        s.sendall(len(wire).to_bytes(2, "big") + wire)
        buf = b""
        while len(buf) < 2 or len(buf) < 2 + int.from_bytes(buf[:2], "big"):
            chunk = s.recv(65535)
            if not chunk:
                break
            buf += chunk
    return dns.message.from_wire(buf[2:])


class Answer:
    """What is compared of a reply."""

    def __init__(self, msg):
        self.msg = msg
        self.none = msg is None or isinstance(msg, str)
        if self.none:
            self.what = "no answer" if msg is None else msg
            return
        self.rcode = msg.rcode()
        self.tc = bool(msg.flags & dns.flags.TC)
        self.answer = frozenset(self._rrset(r) for r in msg.answer)
        self.auth_types = frozenset(r.rdtype for r in msg.authority)
        self.ttls = {(r.name.to_text().lower(), r.rdtype): r.ttl for r in msg.answer}

    @staticmethod
    def _rrset(r):
        return (r.name.to_text().lower(), r.rdtype, r.rdclass,
                frozenset(rd.to_text().lower() for rd in r))

    def types(self):
        return {t for (_, t, _, _) in self.answer}

    def key(self):
        if self.none:
            return ("none", self.what)
        return (self.rcode, self.tc, self.answer, self.auth_types)

    def __str__(self):
        if self.none:
            return self.what
        parts = ["%s%s" % (dns.rcode.to_text(self.rcode), " TC" if self.tc else "")]
        for (n, t, _, rds) in sorted(self.answer, key=lambda x: (x[0], x[1])):
            parts.append("%s %s [%s]" % (n, dns.rdatatype.to_text(t),
                                         ", ".join(sorted(rds))[:120]))
        parts.append("auth=%s" % ",".join(sorted(dns.rdatatype.to_text(t)
                                                 for t in self.auth_types)))
        return "; ".join(parts)


# The classes of allowed differences. Each is a predicate on one question and two answers
# (a: ndcache's, b: the reference's, full: knotd's own answer over TCP); the first that holds
# names the difference. docs/ANSWERS.md ("Against a reference resolver") lists them with the RFC
# that allows each.

CHAIN = {dns.rdatatype.CNAME, dns.rdatatype.DNAME}


def reserved_qtype(q, a, b, full):
    """A reserved or meta QTYPE (RFC 6895 3.1): ndcache answers it itself (FORMERR; REFUSED for
    zone transfers) and never forwards or caches it; unbound forwards QTYPE 0 (SERVFAIL here, with
    the CNAME chain it followed) and answers the meta types FORMERR itself. Neither side gives
    records of the type."""
    qtype = q[1]
    if qtype not in RESERVED or a.none or b.none:
        return False
    if NDCACHE_RESERVED_RCODES is not None:
        return a.rcode in NDCACHE_RESERVED_RCODES and not a.answer and b.types() <= CHAIN
    return all(x.types() <= CHAIN for x in (a, b))


def any_rfc8482(q, a, b, full):
    """ANY: ndcache relays the authoritative's minimal answer (RFC 8482 4.1/4.2: one RRset of the
    name, or a synthesized HINFO); unbound answers from its cache, merging the RRsets it has seen.
    Same rcode, no TC, each side only RRsets the name has (or RFC 8482's HINFO)."""
    if q[1] != dns.rdatatype.ANY or a.none or b.none or full is None:
        return False
    if a.rcode != b.rcode or a.tc or b.tc:
        return False
    ok = lambda x: all(r in full or r[1] == dns.rdatatype.HINFO for r in x.answer)
    return ok(a) and ok(b)


def any_chain_rcode(q, a, b, full):
    """ANY at a name a DNAME redirects to a name that does not exist: the same chain on both
    sides, ndcache relays the upstream's NXDOMAIN (RFC 6604 2.1: the RCODE of the last name of
    the chain), unbound answers NOERROR from its cache. RFC 6604 3 lets the RCODE of a chain
    differ between servers; the records are the same."""
    if q[1] != dns.rdatatype.ANY or a.none or b.none or a.answer != b.answer:
        return False
    return (a.types() <= CHAIN and a.types() and a.rcode == dns.rcode.NXDOMAIN
            and b.rcode == dns.rcode.NOERROR and a.tc == b.tc)


def dname_nodata_soa(q, a, b, full):
    """Asked DNAME at a name below a DNAME: the same answer on both sides (the DNAME and the CNAME
    synthesized from it, RFC 6672 3.1; the target has no DNAME), NOERROR. ndcache relays knotd's
    SOA in authority (no data of the type at the target, RFC 2308 2.2); unbound omits it, taking
    the DNAME in the answer for the data asked. The SOA only makes the no-data part cacheable
    (RFC 2308 5); the records a client gets are the same."""
    if q[1] != dns.rdatatype.DNAME or a.none or b.none or a.answer != b.answer:
        return False
    if a.rcode != dns.rcode.NOERROR or b.rcode != a.rcode or a.tc != b.tc:
        return False
    if a.types() != {dns.rdatatype.DNAME, dns.rdatatype.CNAME}:
        return False
    return a.auth_types ^ b.auth_types == {dns.rdatatype.SOA}


def cname_out_of_zone(q, a, b, full):
    """A CNAME out of the upstream's zone: knotd, authoritative only, answers the CNAME alone (it
    does not restart the query in another zone, RFC 1034 4.3.2 step 3a); unbound, a resolver,
    follows it (RFC 1034 5.3.3) and appends the target's records, or the target zone's SOA in
    authority when the target has no data of the type. ndcache forwards
    what its upstream (in a cluster, a recursive kube-dns) answers and does not chase. Narrow:
    ndcache's answer is CNAMEs only, all in unbound's answer; everything unbound adds is owned
    by a name outside the question's zone; same rcode."""
    if a.none or b.none or a.rcode != b.rcode or a.tc or b.tc or not a.answer:
        return False
    if a.types() != {dns.rdatatype.CNAME} or not a.answer <= b.answer:
        return False
    zone = ZONE
    targets = {rd for (_, _, _, rds) in a.answer for rd in rds}
    if not any(not dns.name.from_text(t).is_subdomain(zone) for t in targets):
        return False
    extra = b.answer - a.answer
    return all(not dns.name.from_text(n).is_subdomain(zone) for (n, _, _, _) in extra)


FIRST_CLASSES = [
    ("reserved-qtype", reserved_qtype),
    ("any-rfc8482", any_rfc8482),
    ("any-chain-rcode", any_chain_rcode),
    ("cname-out-of-zone", cname_out_of_zone),
    ("dname-nodata-soa", dname_nodata_soa),
]

# ndcache's second answer against its first: the same classes apply where a second question can
# meet them (ANY: knotd's minimal answer may be another RRset of the name; reserved types).
CACHED_CLASSES = [
    ("reserved-qtype", reserved_qtype),
    ("any-rfc8482", any_rfc8482),
]


def classify(classes, q, a, b, full):
    for name, pred in classes:
        if pred(q, a, b, full):
            return name
    return None


def questions(zone):
    out = []
    for n in NAMES:
        name = zone if n == "@" else "%s.%s" % (n, zone)
        for t in TYPES:
            for edns in (True, False):
                out.append((dns.name.from_text(name), rtype(t), edns))
    return out


def ttl_over(a, full):
    """RRsets of ndcache's answer whose TTL exceeds the zone's (knotd's) TTL."""
    if a.none or full is None:
        return []
    orig = full.ttls
    return ["%s %s %d > %d" % (n, dns.rdatatype.to_text(t), ttl, orig[(n, t)])
            for (n, t), ttl in a.ttls.items() if (n, t) in orig and ttl > orig[(n, t)]]


def qtext(q):
    return "%s %s %s" % (q[0], dns.rdatatype.to_text(q[1]), "edns" if q[2] else "plain")


def compare(args):
    qs = questions(args.zone)
    full = {}
    for q in qs:
        if q[2] or q[1] in RESERVED:
            continue
        try:
            full[(q[0], q[1])] = Answer(ask_tcp(args.knot, q[0], q[1]))
        except Exception:
            full[(q[0], q[1])] = None
    # Every RRset knotd has for a question name (union over the types asked): what an ANY
    # answer may hold.
    union = {}
    for (n, t), f in full.items():
        if f is not None and not f.none:
            union.setdefault(n, set()).update(f.answer)
    first, ref = {}, {}
    for q in qs:
        first[q] = Answer(ask_udp(args.ndcache, *q))
        ref[q] = Answer(ask_udp(args.unbound, *q))
    # The second round, once the first is over: what the first cached or published is in place.
    kernel_before = kernel_answers(args)
    second = {q: Answer(ask_udp(args.ndcache, *q)) for q in qs}
    kernel_after = kernel_answers(args)

    fig = {"questions": len(qs), "first_equal": 0, "cached_equal": 0, "first": {},
           "cached": {}, "unlisted_first": [], "unlisted_cached": [], "ttl": [], "listed": []}
    for q in qs:
        f = full.get((q[0], q[1]))
        fa = f if f is not None and not f.none else None
        have = union.get(q[0])
        a, b, c = first[q], ref[q], second[q]
        if a.key() == b.key():
            fig["first_equal"] += 1
        else:
            cls = classify(FIRST_CLASSES, q, a, b, have)
            if cls:
                fig["first"][cls] = fig["first"].get(cls, 0) + 1
                fig["listed"].append("listed %s: %s\n    ndcache: %s\n    unbound: %s" %
                                     (cls, qtext(q), a, b))
            else:
                fig["unlisted_first"].append("%s\n    ndcache: %s\n    unbound: %s" %
                                             (qtext(q), a, b))
        if c.key() == a.key():
            fig["cached_equal"] += 1
        else:
            cls = classify(CACHED_CLASSES, q, c, a, have)
            if cls:
                fig["cached"][cls] = fig["cached"].get(cls, 0) + 1
                fig["listed"].append("listed (cached) %s: %s\n    first:  %s\n    second: %s"
                                     % (cls, qtext(q), a, c))
            else:
                fig["unlisted_cached"].append("%s\n    first:  %s\n    second: %s" %
                                              (qtext(q), a, c))
        for over in ttl_over(a, fa) + ttl_over(c, fa):
            fig["ttl"].append("%s: %s" % (qtext(q), over))

    print("questions: %d (%d names x %d types x EDNS/plain)" % (len(qs), len(NAMES), len(TYPES)))
    print("ndcache first vs unbound: %d equal" % fig["first_equal"])
    for cls, n in sorted(fig["first"].items()):
        print("  listed %-16s %d" % (cls, n))
    print("  unlisted         %d" % len(fig["unlisted_first"]))
    print("ndcache second vs first: %d equal" % fig["cached_equal"])
    for cls, n in sorted(fig["cached"].items()):
        print("  listed %-16s %d" % (cls, n))
    print("  unlisted         %d" % len(fig["unlisted_cached"]))
    if kernel_before is not None and kernel_after is not None:
        print("second round answered by the kernel: %d of %d" %
              (kernel_after - kernel_before, len(qs)))
    tc = [q for q in qs if not first[q].none and first[q].tc]
    tc_same = sum(1 for q in tc if not ref[q].none and ref[q].tc)
    print("truncated (TC) first answers: %d (%s), unbound TC too: %d" %
          (len(tc), ", ".join(sorted({qtext(q) for q in tc}))[:200], tc_same))
    print("TTLs above the zone's: %d" % len(fig["ttl"]))
    if args.verbose:
        for line in fig["listed"]:
            print(line)
    for line in fig["unlisted_first"][:args.show]:
        print("UNLISTED first: " + line)
    for line in fig["unlisted_cached"][:args.show]:
        print("UNLISTED cached: " + line)
    for line in fig["ttl"][:args.show]:
        print("TTL: " + line)
    bad = fig["unlisted_first"] or fig["unlisted_cached"] or fig["ttl"]
    return 1 if bad else 0


def kernel_answers(args):
    """The sum of ndcache_kernel_answers_total (all kinds), read by --metrics-cmd; None without."""
    if not args.metrics_cmd:
        return None
    out = subprocess.run(args.metrics_cmd, shell=True, capture_output=True, text=True,
                         timeout=10).stdout
    total = 0
    for line in out.splitlines():
        if line.startswith("ndcache_kernel_answers_total"):
            total += int(float(line.split()[-1]))
    return total


def probe(args):
    """What a server answers to reserved/meta types and to other classes (no comparison)."""
    name = dns.name.from_text("www." + args.zone)
    cases = [(t, dns.rdataclass.IN) for t in [0, 41, 128, 249, 250, 251, 252, 253, 254, 255]]
    cases += [(1, c) for c in (dns.rdataclass.CH, dns.rdataclass.HS, dns.rdataclass.NONE,
                               dns.rdataclass.ANY)]
    for t, c in cases:
        for edns in (True, False):
            try:
                a = Answer(ask_udp(args.server, name, t, edns, c))
            except Exception as e:
                a = "error %s" % e
            print("%-9s %-4s %-5s %s" % (dns.rdatatype.to_text(t), dns.rdataclass.to_text(c),
                                         "edns" if edns else "plain", a))
    return 0


def synth(qname, qtype, rcode, answer=(), auth=(), tc=False):
    """A reply made here, for the self-test: answer and auth are "owner ttl type rdata" lines."""
    m = dns.message.make_response(dns.message.make_query(qname, qtype))
    m.set_rcode(rcode)
    if tc:
        m.flags |= dns.flags.TC
    for sect, lines in ((m.answer, answer), (m.authority, auth)):
        for line in lines:
            n, ttl, t, rd = line.split(None, 3)
            rr = dns.rrset.from_text(n, int(ttl), "IN", t, rd)
            for old in sect:
                if old.name == rr.name and old.rdtype == rr.rdtype:
                    old.union_update(rr)
                    break
            else:
                sect.append(rr)
    return Answer(m)


def selftest(args):
    """The classes hold where they should and nothing else passes: answers that differ as a bug
    would make them must come out unlisted."""
    global ZONE
    ZONE = dns.name.from_text("ref.test.")
    NO, NX, SF = dns.rcode.NOERROR, dns.rcode.NXDOMAIN, dns.rcode.SERVFAIL
    soa = "ref.test. 60 SOA ns.ref.test. h.ref.test. 1 3600 600 86400 60"
    www_a = "www.ref.test. 120 A 192.0.2.80"
    www_aaaa = "www.ref.test. 120 AAAA 2001:db8::80"
    have = set(synth(www_a.split()[0], "ANY", NO, [www_a, www_aaaa]).answer)
    www = "www.ref.test."
    cases = [
        # (what, question, ndcache, unbound, the class it must fall in, or None: unlisted)
        ("another address", (www, "A"), synth(www, "A", NO, ["www.ref.test. 120 A 192.0.2.1"]),
         synth(www, "A", NO, [www_a]), None),
        ("NODATA where the upstream has data (the QTYPE 0 poisoning)", (www, "AAAA"),
         synth(www, "AAAA", NO, [], [soa]), synth(www, "AAAA", NO, [www_aaaa]), None),
        ("TC on one side only", (www, "TXT"), synth(www, "TXT", NO, [], [], tc=True),
         synth(www, "TXT", NO, [], [soa]), None),
        ("NXDOMAIN for NODATA", (www, "MX"), synth(www, "MX", NX, [], [soa]),
         synth(www, "MX", NO, [], [soa]), None),
        ("ANY with a record the name does not have", (www, "ANY"),
         synth(www, "ANY", NO, ["www.ref.test. 120 A 192.0.2.1"]),
         synth(www, "ANY", NO, [www_a, www_aaaa]), None),
        ("ANY with another rcode", (www, "ANY"), synth(www, "ANY", SF),
         synth(www, "ANY", NO, [www_a]), None),
        ("data for a reserved type", (www, "TYPE0"),
         synth(www, "TYPE0", NO, ["www.ref.test. 120 TXT x"]), synth(www, "TYPE0", SF), None),
        ("an in-zone CNAME not followed", ("alias.ref.test.", "A"),
         synth("alias.ref.test.", "A", NO, ["alias.ref.test. 300 CNAME www.ref.test."]),
         synth("alias.ref.test.", "A", NO, ["alias.ref.test. 300 CNAME www.ref.test.", www_a]),
         None),
        ("ANY minimal against merged", (www, "ANY"), synth(www, "ANY", NO, [www_a]),
         synth(www, "ANY", NO, [www_a, www_aaaa]), "any-rfc8482"),
        ("reserved type, SERVFAIL both, unbound's chain", ("alias.ref.test.", "TYPE0"),
         synth("alias.ref.test.", "TYPE0", SF),
         synth("alias.ref.test.", "TYPE0", SF, ["alias.ref.test. 300 CNAME www.ref.test."]),
         "reserved-qtype"),
        ("a CNAME out of the zone, followed by unbound", ("ext.ref.test.", "A"),
         synth("ext.ref.test.", "A", NO, ["ext.ref.test. 300 CNAME www.other.test."]),
         synth("ext.ref.test.", "A", NO, ["ext.ref.test. 300 CNAME www.other.test.",
                                           "www.other.test. 300 A 192.0.2.81"]),
         "cname-out-of-zone"),
    ]
    # The class tightened (NDC_REF_RESERVED_RCODES): only ndcache's own refusal passes.
    tight = {dns.rcode.FORMERR, dns.rcode.NOTIMP, dns.rcode.REFUSED}
    cases += [
        ("reserved type refused by ndcache (tightened)", (www, "TYPE0"),
         synth(www, "TYPE0", dns.rcode.NOTIMP), synth(www, "TYPE0", SF), "reserved-qtype", tight),
        ("reserved type relayed (tightened)", ("alias.ref.test.", "TYPE0"),
         synth("alias.ref.test.", "TYPE0", SF),
         synth("alias.ref.test.", "TYPE0", SF, ["alias.ref.test. 300 CNAME www.ref.test."]),
         None, tight),
        ("reserved type NODATA relayed (tightened)", (www, "TYPE128"),
         synth(www, "TYPE128", NO, [], [soa]), synth(www, "TYPE128", dns.rcode.FORMERR), None,
         tight),
    ]
    global NDCACHE_RESERVED_RCODES
    failed = 0
    for what, (n, t), a, b, want, *knob in cases:
        NDCACHE_RESERVED_RCODES = knob[0] if knob else None
        q = (dns.name.from_text(n), rtype(t), True)
        got = None if a.key() == b.key() else classify(FIRST_CLASSES, q, a, b, have)
        equal = a.key() == b.key()
        if equal or got != want:
            failed += 1
            print("self-test FAILED: %s: %s, expected %s" %
                  (what, "equal" if equal else (got or "unlisted"), want or "unlisted"))
    print("self-test: %d cases, %d failed" % (len(cases), failed))
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--ndcache", required=True)
    c.add_argument("--unbound", required=True)
    c.add_argument("--knot", required=True)
    c.add_argument("--zone", required=True)
    c.add_argument("--metrics-cmd", default="")
    c.add_argument("--show", type=int, default=40, help="unlisted differences shown")
    c.add_argument("--verbose", action="store_true", help="show every listed difference too")
    pr = sub.add_parser("probe")
    pr.add_argument("--server", required=True)
    pr.add_argument("--zone", required=True)
    sub.add_parser("selftest")
    args = p.parse_args()
    global ZONE
    global NDCACHE_RESERVED_RCODES
    env = os.environ.get("NDC_REF_RESERVED_RCODES")
    if env:
        NDCACHE_RESERVED_RCODES = {dns.rcode.from_text(r) for r in env.split(",")}
    if args.cmd == "selftest":
        return selftest(args)
    ZONE = dns.name.from_text(args.zone)
    return compare(args) if args.cmd == "compare" else probe(args)


if __name__ == "__main__":
    sys.exit(main())
