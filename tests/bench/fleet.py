#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A fleet of ndcache agents against one fake API server (issue 25): what the fleet costs it.

Runs inside a network namespace the caller made (tests/integration/test_fleet.sh,
tests/bench/fleet_bench.sh), with 169.254.1.1 .. 169.254.1.N on its lo. N agents in socket mode,
one process each, agent i listening on 169.254.1.(i+1):53 with its HTTP on 127.0.0.1:(HTTP+i),
each with its own bearer token TOKEN.agent-i, so the fake server counts each one's requests and
bytes. Phases:

  solo      (--solo) one agent alone: its time to ready, the yardstick for the rollout;
  rollout   N agents started over --rollout-s seconds: time until every agent is ready;
  changes   --changes Service changes, one at a time: from the API write (control POST
            returned) until each agent answers the new ClusterIP (fan-out p50/p99/max);
  restart   the API server stopped and started again above its old resourceVersions (a restart
            after compaction: every watch gets 410): time until every agent has its state again,
            then one more change's fan-out.

Prints per phase: requests and bytes per agent and in all, how the states were fetched
(streamed, watch cache, consistent lists), and the phase's times; key=value lines at the end for
the scripts. --check: fails (exit 1) unless every agent got ready and every change reached every
agent, and, when nothing is refused, no agent made a consistent list in any phase; with
--refuse, that each fell back and still got ready.
"""

import argparse
import http.client
import json
import math
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_k8s_scale  # noqa: E402 (the cluster's objects, as the generator makes them)

TOKEN = "fleet-token"
KINDS = 3  # Namespaces, Services, EndpointSlices (the kube-dns ConfigMap has its own watch)


def log(msg):
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


def pct(vals, p):
    """Nearest rank."""
    if not vals:
        return float("nan")
    s = sorted(vals)
    return s[max(0, math.ceil(p / 100.0 * len(s)) - 1)]


class Fake:
    def __init__(self, a, initial_rv=None):
        self.a = a
        cmd = [sys.executable, a.fakeapi, "--cert", a.certs + "/server.pem",
               "--key", a.certs + "/server.key", "--token", TOKEN, "--objects", a.objects,
               "--port", str(a.api_port), "--control-port", str(a.ctl_port),
               "--bookmark-interval", "5"]
        if a.refuse:
            cmd += ["--refuse", a.refuse]
        if initial_rv:
            cmd += ["--initial-rv", str(initial_rv)]
        self.out = open(os.path.join(a.dir, "fakeapi.out"), "w")
        self.err = open(os.path.join(a.dir, "fakeapi.err"), "a")
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, text=True)
        end = time.monotonic() + a.api_load_max
        line = ""
        while time.monotonic() < end and self.p.poll() is None:
            line = self.p.stdout.readline()
            if line.startswith("fakeapi listening"):
                break
        if not line.startswith("fakeapi listening"):
            self.stop()
            raise RuntimeError("fake API server did not start within %ds" % a.api_load_max)

    def ctl(self, body, path="/control"):
        c = http.client.HTTPConnection("127.0.0.1", self.a.ctl_port, timeout=30)
        if body is None:
            c.request("GET", path)
        else:
            c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status != 200:
            raise RuntimeError("control %s: %d %s" % (body, r.status, data[:200]))
        return json.loads(data)

    def stats(self):
        return self.ctl(None, "/stats")

    def cpu_s(self):
        return cpu_s(self.p.pid)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def cpu_s(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Agent:
    def __init__(self, a, i, name=None):
        self.i = i
        self.name = name or "agent-%d" % i
        self.addr = "169.254.1.%d" % (i + 1) if i < 254 else "169.254.2.%d" % (i - 253)
        self.http = a.http_base + i
        d = os.path.join(a.dir, self.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "token"), "w") as f:
            f.write("%s.%s" % (TOKEN, self.name))
        with open(os.path.join(d, "kubeconfig"), "w") as f:
            f.write("""apiVersion: v1
kind: Config
current-context: fleet
contexts:
- name: fleet
  context: {cluster: fake, user: ndcache}
clusters:
- name: fake
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority: %s/ca.pem
users:
- name: ndcache
  user:
    tokenFile: %s/token
""" % (a.api_port, a.certs, d))
        self.conf = os.path.join(d, "ndcache.yaml")
        with open(self.conf, "w") as f:
            f.write("""listen: [%s]
source:
  kubernetes: {kubeconfig: %s/kubeconfig}
dataplane: {mode: socket}
http: {listen: "127.0.0.1:%d"}
workers: 1
""" % (self.addr, d, self.http))
        self.log = os.path.join(d, "ndcache.log")
        self.p = None
        self.t_start = self.t_ready = None

    def start(self, binary, node=None):
        self.t_start = time.monotonic()
        # node: env NODE_NAME, as the DaemonSet passes it: the agent also watches its node's
        # pods (pod identity, issue 37), one more watch per agent
        env = dict(os.environ, NODE_NAME=node) if node else None
        with open(self.log, "a") as lf:
            self.p = subprocess.Popen([binary, "--config", self.conf], stdout=subprocess.DEVNULL,
                                      stderr=lf, env=env)

    def get(self, path, timeout=1.0):
        c = http.client.HTTPConnection("127.0.0.1", self.http, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()

    def syncs(self):
        """ndcache_k8s_syncs_total over every way, or None."""
        try:
            code, text = self.get("/metrics", 5)
        except OSError:
            return None
        if code != 200:
            return None
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("ndcache_k8s_syncs_total{"))

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def wait_ready(agents, limit_s):
    """Polls /ready of each agent not yet ready; sets t_ready. False on the time limit."""
    end = time.monotonic() + limit_s
    todo = [g for g in agents if g.t_ready is None]
    while todo and time.monotonic() < end:
        for g in list(todo):
            if g.p.poll() is not None:
                raise RuntimeError("%s exited with %d (log %s)" % (g.name, g.p.returncode, g.log))
            try:
                code, _ = g.get("/ready", 0.5)
            except OSError:
                continue
            if code == 200:
                g.t_ready = time.monotonic()
                todo.remove(g)
        time.sleep(0.02)
    return not todo


def dns_query(qid, name):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
    return q + struct.pack("!HH", 1, 1)


def dns_ips(m):
    """(id, set of A addresses) of a reply."""
    qid, _, qd, an = struct.unpack("!HHHH", m[:8])
    p = 12
    for _ in range(qd):
        while m[p]:
            p += m[p] + 1
        p += 5
    ips = set()
    for _ in range(an):
        if m[p] & 0xC0 == 0xC0:
            p += 2
        else:
            while m[p]:
                p += m[p] + 1
            p += 1
        t, _, _, ln = struct.unpack("!HHIH", m[p:p + 10])
        p += 10
        if t == 1 and ln == 4:
            ips.add(socket.inet_ntoa(m[p:p + 4]))
        p += ln
    return qid, ips


def fan_out(sock, agents, fqdn, ip, t0, limit_s):
    """Seconds from t0 until each agent answers fqdn with ip (None: not within limit_s)."""
    got = {}
    qids = {}
    pending = {g.addr: g for g in agents}
    end = t0 + limit_s
    nxt = 0
    while pending and time.monotonic() < end:
        for addr in pending:
            nxt = (nxt + 1) & 0xFFFF
            qids[nxt] = addr
            sock.sendto(dns_query(nxt, fqdn), (addr, 53))
        # Asked again every 1 ms for the first 20 ms (the resolution of the figures), then
        # every 5 ms (the rest is a backlog: no need to load the agents further).
        deadline = time.monotonic() + (0.001 if time.monotonic() - t0 < 0.02 else 0.005)
        while pending and time.monotonic() < deadline:
            try:
                m, src = sock.recvfrom(4096)
            except BlockingIOError:
                time.sleep(0.0005)
                continue
            try:
                qid, ips = dns_ips(m)
            except (IndexError, struct.error):
                continue
            addr = qids.get(qid)
            if addr in pending and ip in ips:
                got[addr] = time.monotonic() - t0
                del pending[addr]
    return [got.get(g.addr) for g in agents]


def client_sums(stats, names):
    """Per-client counters of the named clients, and their sums."""
    cl = stats.get("clients", {})
    per = {n: cl.get(n, {}) for n in names}
    keys = ("requests", "bytes", "lists_consistent", "lists_cache", "lists_exact", "watches",
            "initial_streams", "refused")
    tot = {k: sum(c.get(k, 0) for c in per.values()) for k in keys}
    return per, tot


def state_bytes(a):
    """Bytes of each kind's whole state as one JSON list, as client "-": from the watch cache,
    or (refused) one consistent list without a limit."""
    ctx = ssl.create_default_context(cafile=os.path.join(a.certs, "ca.pem"))
    res = {}
    for key, path in (("namespaces", "/api/v1/namespaces"), ("services", "/api/v1/services"),
                      ("endpointslices", "/apis/discovery.k8s.io/v1/endpointslices")):
        res["state_bytes_" + key] = 0
        for query in ("?resourceVersion=0", ""):
            c = http.client.HTTPSConnection("127.0.0.1", a.api_port, context=ctx, timeout=60)
            c.request("GET", path + query, headers={"Authorization": "Bearer " + TOKEN})
            r = c.getresponse()
            body = r.read()
            c.close()
            if r.status == 200:
                res["state_bytes_" + key] = len(body)
                break
    return res


def diff(after, before):
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def phase_report(name, per_after, per_before, n, extra, out):
    per = [diff(per_after[k], per_before.get(k, {})) for k in per_after]
    tot = {k: sum(p.get(k, 0) for p in per) for k in ("requests", "bytes", "lists_consistent",
                                                        "lists_cache", "lists_exact", "watches",
                                                        "initial_streams", "refused")}
    req = [p.get("requests", 0) for p in per]
    byt = [p.get("bytes", 0) for p in per]
    log("  %-8s requests: %d in all, per agent %.1f (max %d); bytes: %.1f MB in all, per agent "
        "%.2f MB (max %.2f); consistent lists %d, cache lists %d, streamed states %d, watch "
        "streams %d, refused %d; %s" %
        (name, tot["requests"], tot["requests"] / n, max(req or [0]), tot["bytes"] / 1e6,
         tot["bytes"] / n / 1e6, max(byt or [0]) / 1e6, tot["lists_consistent"] +
         tot["lists_exact"], tot["lists_cache"], tot["initial_streams"], tot["watches"],
         tot["refused"], extra))
    for k, v in tot.items():
        out["%s_%s" % (name, k)] = v
    out["%s_bytes_per_agent" % name] = tot["bytes"] / n
    out["%s_requests_per_agent" % name] = tot["requests"] / n
    return tot


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ndcache", required=True)
    ap.add_argument("--fakeapi", required=True)
    ap.add_argument("--certs", required=True)
    ap.add_argument("--cluster", required=True, help="gen_k8s_scale.py --out directory")
    ap.add_argument("--dir", required=True, help="scratch directory (configs, logs)")
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--rollout-s", type=float, default=3.0)
    ap.add_argument("--changes", type=int, default=100)
    ap.add_argument("--refuse", default="", help="passed to the fake API server")
    ap.add_argument("--solo", action="store_true", help="first time one agent alone")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--node-names", action="store_true",
                    help="env NODE_NAME=node-<i> per agent: each also watches its node's pods")
    ap.add_argument("--api-port", type=int, default=16543)
    ap.add_argument("--ctl-port", type=int, default=16544)
    ap.add_argument("--http-base", type=int, default=19300)
    ap.add_argument("--ready-max", type=float, default=240)
    ap.add_argument("--change-max", type=float, default=10)
    ap.add_argument("--api-load-max", type=int, default=120)
    a = ap.parse_args()
    a.objects = os.path.join(a.cluster, "cluster.json")
    if not 1 <= a.agents <= 500:
        ap.error("--agents must be 1..500")

    svcs = []
    with open(os.path.join(a.cluster, "services.tsv")) as f:
        for line in f:
            i, ns, name, cip, alt, _ = line.split()
            if cip != "None" and i != "0":
                svcs.append((ns, name, cip, alt))
    out = {"agents": a.agents, "services": len(svcs)}
    failures = []
    fake = None
    agents = []
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    try:
        t0 = time.monotonic()
        fake = Fake(a)
        log("fleet: fake API server up in %.1f s (%s)" % (time.monotonic() - t0,
                                                          "refusing " + a.refuse
                                                          if a.refuse else "every way offered"))
        out.update(state_bytes(a))
        log("  state    one agent's kinds as JSON lists: Namespaces %.2f MB, Services %.2f MB, "
            "EndpointSlices %.2f MB (kube-proxy watches the latter two, without headless "
            "Services' slices)" % (out["state_bytes_namespaces"] / 1e6,
                                   out["state_bytes_services"] / 1e6,
                                   out["state_bytes_endpointslices"] / 1e6))
        if a.solo:
            solo = Agent(a, 0, "solo")
            solo.start(a.ndcache)
            if not wait_ready([solo], a.ready_max):
                raise RuntimeError("the solo agent was not ready within %ds" % a.ready_max)
            out["solo_ready_s"] = solo.t_ready - solo.t_start
            out["solo_cpu_s"] = cpu_s(solo.p.pid)
            log("  solo     one agent alone: ready after %.2f s (its CPU %.2f s)" %
                (out["solo_ready_s"], out["solo_cpu_s"]))
            solo.stop()

        # --- rollout ---
        agents = [Agent(a, i) for i in range(a.agents)]
        names = [g.name for g in agents]
        before, _ = client_sums(fake.stats(), names)
        api_cpu0 = fake.cpu_s()
        t_roll = time.monotonic()
        for i, g in enumerate(agents):
            when = t_roll + a.rollout_s * i / max(1, a.agents - 1)
            # Until the next start, the ones started so far are polled (their ready times).
            if when > time.monotonic():
                wait_ready(agents[:i], when - time.monotonic())
            time.sleep(max(0.0, when - time.monotonic()))
            g.start(a.ndcache, "node-%d" % i if a.node_names else None)
        if not wait_ready(agents, a.ready_max):
            failures.append("%d agents not ready within %ds" %
                            (sum(g.t_ready is None for g in agents), a.ready_max))
            raise RuntimeError(failures[-1])
        own = [g.t_ready - g.t_start for g in agents]
        out["rollout_all_ready_s"] = max(g.t_ready for g in agents) - t_roll
        out["rollout_ready_p50_s"] = pct(own, 50)
        out["rollout_ready_max_s"] = max(own)
        out["rollout_api_cpu_s"] = fake.cpu_s() - api_cpu0
        out["rollout_agents_cpu_s"] = sum(cpu_s(g.p.pid) for g in agents)
        out["agents_rss_mb"] = sum(rss_kb(g.p.pid) for g in agents) / 1024
        after, _ = client_sums(fake.stats(), names)
        phase_report("rollout", after, before, a.agents,
                     "every agent ready %.2f s after the first started (each from its own "
                     "start: p50 %.2f s, max %.2f s)" % (out["rollout_all_ready_s"],
                                                         out["rollout_ready_p50_s"],
                                                         out["rollout_ready_max_s"]), out)
        log("           CPU during the rollout: agents %.1f s in all, fake API server %.1f s; "
            "agents' RSS %.0f MB in all" % (out["rollout_agents_cpu_s"],
                                            out["rollout_api_cpu_s"], out["agents_rss_mb"]))

        # --- changes ---
        before = after
        lat = []
        lost = 0
        for k in range(a.changes):
            ns, name, cip, alt = svcs[(k * 97) % len(svcs)]
            fqdn = "%s.%s.svc.cluster.local" % (name, ns)
            fake.ctl({"op": "apply", "object": gen_k8s_scale.service(ns, name, alt)})
            t0 = time.monotonic()
            r = fan_out(sock, agents, fqdn, alt, t0, a.change_max)
            lost += sum(x is None for x in r)
            lat += [x for x in r if x is not None]
        after, _ = client_sums(fake.stats(), names)
        out["changes"] = a.changes
        out["fanout_n"] = len(lat)
        out["fanout_lost"] = lost
        out["fanout_p50_ms"] = pct(lat, 50) * 1e3
        out["fanout_p99_ms"] = pct(lat, 99) * 1e3
        out["fanout_max_ms"] = max(lat or [float("nan")]) * 1e3
        if lost:
            failures.append("%d of %d answers never came within %.0fs" %
                            (lost, a.changes * a.agents, a.change_max))
        tot = phase_report("changes", after, before, a.agents,
                           "%d changes: API write to each agent answering, p50 %.1f ms, p99 "
                           "%.1f ms, max %.1f ms over %d (change, agent) pairs%s" %
                           (a.changes, out["fanout_p50_ms"], out["fanout_p99_ms"],
                            out["fanout_max_ms"], len(lat),
                            ", %d never" % lost if lost else ""), out)
        out["bytes_per_change_per_agent"] = tot["bytes"] / max(1, a.changes) / a.agents

        # --- restart ---
        rv = int(fake.stats()["resourceVersion"])
        syncs0 = [g.syncs() for g in agents]
        fake.stop()
        t_down = time.monotonic()
        fake = Fake(a, initial_rv=rv + 1000)
        t_up = time.monotonic()
        api_cpu0 = fake.cpu_s()
        end = t_up + a.ready_max
        todo = set(range(a.agents))
        done_at = {}
        while todo and time.monotonic() < end:
            for i in list(todo):
                s = agents[i].syncs()
                if s is not None and syncs0[i] is not None and s >= syncs0[i] + KINDS:
                    done_at[i] = time.monotonic()
                    todo.discard(i)
            time.sleep(0.05)
        if todo:
            failures.append("%d agents did not get their state again within %ds after the "
                            "restart" % (len(todo), a.ready_max))
        out["restart_down_s"] = t_up - t_down
        out["restart_all_synced_s"] = (max(done_at.values()) - t_up) if done_at else float("nan")
        out["restart_api_cpu_s"] = fake.cpu_s() - api_cpu0
        ns, name, cip, alt = svcs[-1]
        fake.ctl({"op": "apply", "object": gen_k8s_scale.service(ns, name, alt)})
        t0 = time.monotonic()
        r = fan_out(sock, agents, "%s.%s.svc.cluster.local" % (name, ns), alt, t0, a.change_max)
        after_restart = [x for x in r if x is not None]
        if len(after_restart) != a.agents:
            failures.append("after the restart, %d agents never answered a change" %
                            (a.agents - len(after_restart)))
        out["restart_change_max_ms"] = max(after_restart or [float("nan")]) * 1e3
        after, _ = client_sums(fake.stats(), names)
        phase_report("restart", after, {}, a.agents,
                     "server down %.1f s (its load); every agent's state again %.2f s after it "
                     "listened; then a change reached all in %.1f ms" %
                     (out["restart_down_s"], out["restart_all_synced_s"],
                      out["restart_change_max_ms"]), out)

        if a.check:
            consistent = sum(out.get("%s_lists_consistent" % p, 0) +
                             out.get("%s_lists_exact" % p, 0)
                             for p in ("rollout", "restart"))
            if not a.refuse and consistent:
                failures.append("%d consistent lists with the watch cache and the stream "
                                "offered" % consistent)
            if "stream" in a.refuse and "cache" in a.refuse and not consistent:
                failures.append("stream and cache refused, yet no consistent list")
            if not a.refuse and out["rollout_initial_streams"] < KINDS * a.agents:
                failures.append("only %d streamed states for %d agents" %
                                (out["rollout_initial_streams"], a.agents))
    except (RuntimeError, OSError) as e:
        failures.append(str(e))
    finally:
        for g in agents:
            g.stop()
        if fake:
            fake.stop()
    for k in sorted(out):
        v = out[k]
        log("%s=%s" % (k, ("%.3f" % v) if isinstance(v, float) else v))
    for f in failures:
        log("FAILED: " + f)
    if a.check:
        log("fleet: %s" % ("checks passed" if not failures else "%d check(s) FAILED" %
                           len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
