#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Latency percentiles from `dnsperf -v` output (dnsperf 2.10).

dnsperf -v prints one line per finished query:
  "> NOERROR name A 0.000123"    answered: response code, the query line, latency in seconds
  "> T name A"                   timed out (lost)
  "> I name A"                   interrupted (outstanding when dnsperf was stopped)

Prints one line of key=value pairs for the shell:
  answered=N lost=N noerror=N other_rcodes=N p50_us=X p99_us=X p999_us=X
Percentiles use the nearest-rank method over every query that was sent (answered + lost), with
lost queries ranked after every answered one: a percentile that falls on a lost query prints as
"lost" rather than silently shrinking the tail. Exit 1 when the file holds no query lines.
"""

import math
import sys

PERCENTILES = (("p50_us", 50.0), ("p99_us", 99.0), ("p999_us", 99.9))


def parse(lines):
    lat_us = []
    lost = 0
    noerror = 0
    other = 0
    for line in lines:
        if not line.startswith("> "):
            continue
        f = line.split()
        if len(f) < 2:
            continue
        if f[1] in ("T", "I"):
            lost += 1
            continue
        try:
            secs = float(f[-1])
        except ValueError:
            continue
        # dnsperf prints whole microseconds ("%u.%06u"): round, don't truncate float error.
        lat_us.append(int(round(secs * 1e6)))
        if f[1] == "NOERROR":
            noerror += 1
        else:
            other += 1
    return lat_us, lost, noerror, other


def nearest_rank(sorted_vals, total, pct):
    """Value at rank ceil(pct/100 * total); ranks past the answered ones are lost queries."""
    rank = max(1, math.ceil(pct / 100.0 * total))
    if rank > len(sorted_vals):
        return "lost"
    return str(sorted_vals[rank - 1])


def main(argv):
    if len(argv) != 1:
        sys.stderr.write("usage: percentiles.py DNSPERF_V_OUTPUT\n")
        return 2
    with open(argv[0], encoding="utf-8", errors="replace") as f:
        lat_us, lost, noerror, other = parse(f)
    total = len(lat_us) + lost
    if total == 0:
        sys.stderr.write("percentiles.py: no '> ' query lines in %s (was dnsperf run with -v?)\n"
                         % argv[0])
        return 1
    lat_us.sort()
    out = ["answered=%d" % len(lat_us), "lost=%d" % lost, "noerror=%d" % noerror,
           "other_rcodes=%d" % other]
    for key, pct in PERCENTILES:
        out.append("%s=%s" % (key, nearest_rank(lat_us, total, pct)))
    print(" ".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
