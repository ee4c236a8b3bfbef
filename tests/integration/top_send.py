#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sends known queries, one at a time, each waiting for its answer (issue 37's tests).

  top_send.py SERVER COUNT NAME[:TYPE] [NAME[:TYPE] ...]

COUNT queries in all, the names taken by turns; prints one JSON line: {"sent": n, "answered": n,
"rcodes": {"NOERROR": n, ...}, "by_name": {"name/TYPE/RCODE": n}}. Exit 1 when a query goes
unanswered (2 s each): the counts the test compares must be what was really sent and answered.
"""
import json
import random
import socket
import struct
import sys

TYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15, "TXT": 16, "AAAA": 28,
         "SRV": 33}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def query(name, qtype):
    qid = random.randrange(65536)
    wire = b"".join(bytes([len(l)]) + l.encode() for l in name.rstrip(".").split(".")) + b"\0"
    return qid, struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + wire + struct.pack("!HH", qtype, 1)


def main():
    server, count, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2.0)
    out = {"sent": 0, "answered": 0, "rcodes": {}, "by_name": {}}
    for i in range(count):
        spec = names[i % len(names)]
        name, _, t = spec.partition(":")
        t = t or "A"
        qid, msg = query(name, TYPES[t])
        s.sendto(msg, (server, 53))
        out["sent"] += 1
        while True:
            try:
                data, _ = s.recvfrom(65535)
            except socket.timeout:
                print(json.dumps(out))
                print(f"no answer to {name} {t} (query {i})", file=sys.stderr)
                return 1
            if len(data) >= 12 and struct.unpack("!H", data[:2])[0] == qid:
                break
        rc = RCODES.get(data[3] & 0xF, str(data[3] & 0xF))
        out["answered"] += 1
        out["rcodes"][rc] = out["rcodes"].get(rc, 0) + 1
        key = f"{name.rstrip('.').lower()}./{t}/{rc}"
        out["by_name"][key] = out["by_name"].get(key, 0) + 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
