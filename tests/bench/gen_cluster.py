#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Synthetic Kubernetes cluster for the DNS benchmarks.

Writes four files into --out, all describing the same records, so that ndcache and a reference
server answer identical questions identically:

  cluster.json        a Kubernetes List as `kubectl get ns,svc,endpointslices,pods -A -o json`
                      writes it: Namespaces, Services and discovery.k8s.io/v1 EndpointSlices
  unbound-local.conf  unbound local-data lines (to include inside `server:`): one A per ClusterIP
                      service, one A per ready endpoint of each headless service, same TTL
  queries.txt         dnsperf input, "name A" per line: every service name once, shuffled
  expected.txt        "name ip[,ip...]" per service (IPs sorted), for answer checks

The first service is kubernetes.default (10.96.0.1), as in every real cluster. IPs are answer data
only (10.96.0.0/12 service range, 10.244.0.0/16 pod range); nothing is ever sent to them.
The output depends only on the arguments (--seed), so runs are repeatable.
"""

import argparse
import ipaddress
import json
import os
import random
import sys

ZONE = "cluster.local"
SVC_NET = ipaddress.IPv4Address("10.96.0.0")
POD_NET = ipaddress.IPv4Address("10.244.0.0")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--services", type=int, default=1000, help="services in all (default 1000)")
    p.add_argument("--namespaces", type=int, default=20, help="namespaces (default 20)")
    p.add_argument("--headless-pct", type=float, default=20.0,
                   help="percent of services that are headless (default 20)")
    p.add_argument("--endpoints", type=int, default=3,
                   help="ready endpoints per headless service (default 3)")
    p.add_argument("--not-ready", type=int, default=0,
                   help="extra not-ready endpoints per headless service, never answered "
                   "(default 0)")
    p.add_argument("--ttl", type=int, default=30,
                   help="record TTL in unbound-local.conf (default 30)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    a = p.parse_args(argv)
    if a.services < 1 or a.namespaces < 1:
        p.error("--services and --namespaces must be at least 1")
    if not 0 <= a.headless_pct <= 100:
        p.error("--headless-pct must be 0..100")
    if a.endpoints < 1 or a.not_ready < 0:
        p.error("--endpoints must be at least 1 and --not-ready at least 0")
    # 10.96.0.0/12 holds about a million ClusterIPs; 10.244.0.0/16 65534 pod IPs.
    n_eps = a.services * (a.endpoints + a.not_ready) + a.services
    if a.services > 1000000 or n_eps > 65000:
        p.error("too many services/endpoints for the 10.96.0.0/12 and 10.244.0.0/16 ranges")
    return a


def namespace(name):
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def service(ns, name, cluster_ip):
    ip = cluster_ip if cluster_ip else "None"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": ip,
            "clusterIPs": [ip],
            "ipFamilies": ["IPv4"],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
        },
    }


def slice_(ns, svc, eps):
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": svc + "-x1",
            "namespace": ns,
            "labels": {"kubernetes.io/service-name": svc},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [ip], "conditions": {"ready": ready}} for ip, ready in eps
        ],
    }


def build(a):
    rng = random.Random(a.seed)
    ns_names = ["default"] + ["ns-%03d" % i for i in range(1, a.namespaces)]
    n_headless = round(a.services * a.headless_pct / 100.0)
    # kubernetes.default stays a ClusterIP service, as in a real cluster.
    headless = set(rng.sample(range(1, a.services), min(n_headless, a.services - 1)))

    items = [namespace(n) for n in ns_names]
    local_data = []
    expected = []
    next_svc = 10  # 10.96.0.1 is kubernetes; the rest start at .10
    next_pod = 2
    for i in range(a.services):
        if i == 0:
            ns, name, cip = "default", "kubernetes", str(SVC_NET + 1)
        else:
            ns, name = ns_names[i % len(ns_names)], "svc-%05d" % i
            cip = None if i in headless else str(SVC_NET + next_svc)
            if cip:
                next_svc += 1
        n_ready = a.endpoints if cip is None else 1
        eps = []
        for k in range(n_ready + (a.not_ready if cip is None else 0)):
            eps.append((str(POD_NET + next_pod), k < n_ready))
            next_pod += 1
        items.append(service(ns, name, cip))
        items.append(slice_(ns, name, eps))
        fqdn = "%s.%s.svc.%s" % (name, ns, ZONE)
        answers = [cip] if cip else [ip for ip, ready in eps if ready]
        for ip in answers:
            local_data.append('\tlocal-data: "%s. %d IN A %s"\n' % (fqdn, a.ttl, ip))
        answers.sort(key=lambda s: ipaddress.IPv4Address(s))
        expected.append("%s %s\n" % (fqdn, ",".join(answers)))

    queries = ["%s A\n" % line.split()[0] for line in expected]
    rng.shuffle(queries)
    cluster = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
               "items": items}
    return cluster, local_data, queries, expected


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    cluster, local_data, queries, expected = build(a)
    write(os.path.join(a.out, "cluster.json"), json.dumps(cluster, indent=1) + "\n")
    write(os.path.join(a.out, "unbound-local.conf"), "".join(local_data))
    write(os.path.join(a.out, "queries.txt"), "".join(queries))
    write(os.path.join(a.out, "expected.txt"), "".join(expected))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
