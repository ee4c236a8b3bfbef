#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Large synthetic cluster for the Kubernetes-sync benchmark (k8s_bench.sh).

Writes into --out:

  cluster.json   a Kubernetes List (compact JSON) for the fake API server's --objects:
                 Namespaces, Services and one discovery.k8s.io/v1 EndpointSlice per Service
  services.tsv   one line per Service: "index namespace name clusterIP altIP endpointIPs"
                 (clusterIP "None" and altIP "-" for headless ones; endpoint IPs comma-separated
                 in slice order), for the change driver and the answer checks

Layout (deterministic, no randomness, so the driver can recompute any object):
  - service 0 is kubernetes.default (10.96.0.1); service i >= 1 is svc-NNNNNN in namespace
    ns-NNNN number i % namespaces (ns-0000 is replaced by "default");
  - every 5th service (i % 5 == 4) is headless: exactly 20% at multiples of 5;
  - every service has one EndpointSlice <name>-abcde with --endpoints ready endpoints; those
    of headless services carry hostnames (<name>-0, -1, ...), as a StatefulSet's do.
IPs are answer data only, never a destination: ClusterIPs from 10.96.0.0/12 (the original at
10.96.0.10 + i, the alternate the driver switches to at 10.104.0.0 + i), endpoints from
10.128.0.0/10.
"""

import argparse
import ipaddress
import json
import os
import socket
import struct
import sys

ZONE = "cluster.local"
SVC_BASE = int(ipaddress.IPv4Address("10.96.0.10"))
ALT_BASE = int(ipaddress.IPv4Address("10.104.0.0"))
POD_BASE = int(ipaddress.IPv4Address("10.128.0.2"))
MAX_SERVICES = 500000  # keeps both ClusterIP ranges inside 10.96.0.0/12 and apart
MAX_ENDPOINTS = 4000000  # 10.128.0.0/10


def ip(n):
    return socket.inet_ntoa(struct.pack("!I", n))


def ns_name(i, namespaces):
    k = i % namespaces
    return "default" if k == 0 else "ns-%04d" % k


def svc_ident(i, namespaces):
    """(namespace, name, clusterIP or None, alternate clusterIP or None) of service i."""
    if i == 0:
        return "default", "kubernetes", "10.96.0.1", ip(ALT_BASE)
    ns = ns_name(i, namespaces)
    name = "svc-%06d" % i
    if i % 5 == 4:
        return ns, name, None, None
    return ns, name, ip(SVC_BASE + i), ip(ALT_BASE + i)


def namespace(name):
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def service(ns, name, cluster_ip):
    cip = cluster_ip or "None"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": cip,
            "clusterIPs": [cip],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
        },
    }


def endpoint_ips(i, per_svc):
    return [ip(POD_BASE + i * per_svc + k) for k in range(per_svc)]


def endpoint_slice(i, ns, name, headless, per_svc):
    eps = []
    for k, a in enumerate(endpoint_ips(i, per_svc)):
        ep = {"addresses": [a], "conditions": {"ready": True, "serving": True,
                                               "terminating": False},
              "nodeName": "node-%03d" % ((i + k) % 100)}
        if headless:
            ep["hostname"] = "%s-%d" % (name, k)
        eps.append(ep)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name + "-abcde",
            "namespace": ns,
            "labels": {"kubernetes.io/service-name": name,
                       "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": eps,
    }


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--services", type=int, default=100000, help="services (default 100000)")
    p.add_argument("--namespaces", type=int, default=0,
                   help="namespaces (default: services / 50, at least 1: 2000 for 100000)")
    p.add_argument("--endpoints", type=int, default=3,
                   help="ready endpoints per service, one slice each (default 3)")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    a = p.parse_args(argv)
    if not 1 <= a.services <= MAX_SERVICES:
        p.error("--services must be 1..%d" % MAX_SERVICES)
    if a.namespaces == 0:
        a.namespaces = max(1, a.services // 50)
    if a.namespaces < 1 or a.endpoints < 1 or a.services * a.endpoints > MAX_ENDPOINTS:
        p.error("--namespaces and --endpoints must be at least 1, endpoints in all <= %d"
                % MAX_ENDPOINTS)
    return a


def main(argv):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    items = [namespace(ns_name(k, a.namespaces)) for k in range(a.namespaces)]
    tsv = []
    for i in range(a.services):
        ns, name, cip, alt = svc_ident(i, a.namespaces)
        items.append(service(ns, name, cip))
        items.append(endpoint_slice(i, ns, name, cip is None, a.endpoints))
        tsv.append("%d %s %s %s %s %s\n" % (i, ns, name, cip or "None", alt or "-",
                                             ",".join(endpoint_ips(i, a.endpoints))))
    path = os.path.join(a.out, "cluster.json")
    with open(path + ".tmp", "w", encoding="ascii") as f:
        # dumps, not dump: dump streams through the pure-Python encoder (several times slower).
        f.write(json.dumps({"apiVersion": "v1", "kind": "List",
                            "metadata": {"resourceVersion": ""}, "items": items},
                           separators=(",", ":")))
        f.write("\n")
    os.replace(path + ".tmp", path)
    with open(os.path.join(a.out, "services.tsv"), "w", encoding="ascii") as f:
        f.write("".join(tsv))
    n_eps = a.services * a.endpoints
    sys.stdout.write("services=%d headless=%d namespaces=%d slices=%d endpoints=%d bytes=%d\n" % (
        a.services, sum(1 for i in range(a.services) if i % 5 == 4), a.namespaces, a.services,
        n_eps, os.path.getsize(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
