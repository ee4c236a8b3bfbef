#!/usr/bin/env python3
"""Checks deploy/kubernetes/ (manifests and Dockerfile) against the code, without a cluster.

Usage: check_manifests.py --ndcache BUILD/control/ndcache [--root REPO] [--manifest FILE]
                          [--self-test]
--manifest: check FILE (e.g. `kubectl kustomize` output of an overlay) instead of
deploy/kubernetes/ndcache.yaml.

What it compares, and where the truth comes from:
- every document parses (duplicate keys are errors: PyYAML would keep the last one silently),
  has a known apiVersion/kind, a name, and the namespaced ones share one namespace;
- the ClusterRole grants exactly list and watch (what control/k8s/k8s_client.c requests) on
  exactly the collections of the client's kinds table (control/k8s/k8s_stream.c) (Pods: the
  node's own, listed by spec.nodeName for pod identity, and all with records.pods: verified);
  a kind listed per node needs env NODE_NAME from the downward API (spec.nodeName); a kind
  the table reads in one namespace by name (fieldSelector=metadata.name=..., the kube-dns
  ConfigMap, watched by control/reload/reload_kube_dns.c unless source.kubernetes.kube_dns_configmap is false)
  is granted by a Role in that namespace with exactly that name in resourceNames, and by
  nothing broader: a kind added to the client without RBAC fails here; the bindings name the
  ServiceAccount the DaemonSet runs as;
- the ConfigMap's config is accepted by the real agent (`ndcache --check-config`), selects the
  in-cluster source, and its addresses agree with the Service, the init container and the probes;
  the upstream is not a listen address (a loop); a listen address that is not link-local (the
  kube-dns ClusterIP, transparent mode) comes with the node-setup container (deploy/node-setup.sh
  hold: root, NET_ADMIN and NET_RAW, the host's xtables lock, the same addresses) and a preStop
  delay on the agent; a node-setup.sh the containers run is where the Dockerfile copies it;
- the DaemonSet: selector against template labels, host network, DNS policy, priority, taints,
  capabilities (what the fast path needs, nothing privileged), mounts against the config, probes
  against control/http/http.c's paths and the config's http.listen port, a surge rolling update (maxSurge 1, maxUnavailable 0, no host ports);
- the Dockerfile: ENTRYPOINT's --config is the ConfigMap's mount path and key, its USER is the
  DaemonSet's runAsUser, its setcap list is the DaemonSet's capabilities.add, its runtime stage
  starts from Debian 12 (FROM, through an ARG's default); the DaemonSet's two containers run one
  image, ndcache:<version in meson.build> (any registry in front).
--self-test applies known mistakes to copies of the inputs and requires each to be reported.
"""
import argparse
import copy
import ipaddress
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import yaml

KNOWN_KINDS = {
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("apps/v1", "DaemonSet"),
}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding"}
CONFIG_KEY = "ndcache.yaml"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with the same key twice."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                _construct_mapping)


class Inputs:
    """Everything the check reads; --self-test mutates copies of it."""

    def __init__(self, root, ndcache, manifest=None):
        self.root = root
        self.ndcache = ndcache
        read = lambda p: open(os.path.join(root, p), encoding="utf-8").read()
        self.manifest_path = manifest or "deploy/kubernetes/ndcache.yaml"
        self.manifest = read(self.manifest_path)
        m = re.search(r"^\s*version\s*:\s*'([^']+)'", read("meson.build"), re.M)
        self.version = m.group(1) if m else None
        self.dockerfile = read("deploy/kubernetes/Dockerfile")
        # The client is three files: the requests' URLs, the curl options and the parsers.
        self.k8s_client = "\n".join(read(f) for f in CLIENT_SOURCES)
        # Where the watches are started, with the conditions of the kinds they add.
        agent = sorted(f for f in os.listdir(os.path.join(root, "control/agent")) if f.endswith(".c"))
        self.agent = "\n".join(read("control/agent/" + f) for f in agent) + "\n" + read(
            "control/reload/reload_kube_dns.c")
        self.http = read("control/http/http.c")
        self.config_c = read("control/config/config_default.c")  # the defaults


# ---- facts taken from the code -------------------------------------------------------------

CLIENT_SOURCES = ("control/k8s/k8s_client.c", "control/k8s/k8s_transfer.c",
                  "control/k8s/k8s_stream.c")


def client_kinds(src):
    """{enum: (group, resource, namespace, name)} from the client's kinds table (k8s_stream.c):
    namespace from a path .../namespaces/NS/resource, name from a query
    fieldSelector=metadata.name%3DNAME (both None for a cluster-wide collection)."""
    kinds = {}
    for m in re.finditer(r'\[(NDC_K8S_\w+)\]\s*=\s*\{\s*"([^"]+)"\s*,\s*"(\w+)"\s*,\s*'
                         r'"([^"]+)"\s*,\s*"(\w+)"\s*(?:,\s*"([^"]*)"\s*'
                         r'(?:,\s*(true|false)\s*)?)?\}', src):
        enum, path, _kind, api_version, resource, query, by_node = m.groups()
        if by_node == "true":
            # The node's pods: spec.nodeName=<NODE_NAME> appended at run time. RBAC cannot
            # limit a list/watch to a field selector: a cluster-wide grant.
            if not re.fullmatch(r"fieldSelector=spec\.nodeName(?:%3D|=)", query or ""):
                raise ValueError(f"k8s_stream.c: {enum}: by-node query {query!r} is not "
                                 f"fieldSelector=spec.nodeName= (update check_manifests.py)")
            kinds[enum] = (group_of(api_version), resource, None, None)
            continue
        group = group_of(api_version)
        if not path.endswith("/" + resource):
            raise ValueError(f"k8s_stream.c: {enum}: path {path} does not end in {resource}")
        ns = re.search(r"/namespaces/([^/]+)/" + resource + "$", path)
        name = re.fullmatch(r"fieldSelector=metadata\.name(?:%3D|=)([a-z0-9.-]+)", query or "")
        if query and not name:
            raise ValueError(f"k8s_stream.c: {enum}: query {query!r} is not a name selector "
                             f"this check knows (update check_manifests.py)")
        kinds[enum] = (group, resource, ns.group(1) if ns else None,
                       name.group(1) if name else None)
    return kinds


def client_node_kinds(src):
    """Enums of the client's kinds table listed per node (by_node: spec.nodeName=NODE_NAME)."""
    return set(re.findall(r'\[(NDC_K8S_\w+)\]\s*=\s*\{[^}]*,\s*true\s*\}', src))


def group_of(api_version):
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def client_verbs(src):
    """The RBAC verbs the requests in k8s_client.c amount to."""
    verbs = set()
    # "%s%s?%s%slimit=": server, path, then the kind's query (a field selector) if any.
    if re.search(r'"%s%s\?(?:%s%s)?limit=', src):
        verbs.add("list")
    if re.search(r'\?(?:%s%s)?watch=(true|1)', src):
        verbs.add("watch")
    # An object read by name would be ".../%s" after the collection path.
    if re.search(r'"%s%s/%s', src):
        verbs.add("get")
    # Anything but GET is a write verb this check does not know how to map.
    if re.search(r'CURLOPT_(POST|PUT|UPLOAD|CUSTOMREQUEST)\b', src):
        verbs.add("<write request: update check_manifests.py>")
    return verbs


def conditional_kinds(agent_src):
    """{enum: config condition} for kinds control/agent/ and reload_kube_dns.c add to a watch only
    under a condition."""
    out = {}
    for m in re.finditer(r'if \(([^)]*)\)\s*\n?\s*(?:wo\.)?kinds \|= 1u << (NDC_K8S_\w+);',
                         agent_src):
        cond, enum = m.groups()
        out[enum] = cond
    return out


def condition_holds(cond, cfg):
    """Evaluates the conditions this check knows; unknown ones count as true."""
    if re.fullmatch(r'\s*[\w>.-]*(records|ropts)\.pods == NDC_PODS_VERIFIED\s*', cond):
        return (cfg.get("records") or {}).get("pods", "disabled") == "verified"
    if re.fullmatch(r'\s*[\w>.-]*source\.kube_dns_configmap\s*', cond):
        k8s = (cfg.get("source") or {}).get("kubernetes")
        return "kubernetes" in (cfg.get("source") or {}) and \
            (k8s or {}).get("kube_dns_configmap", True) is not False
    return True


def node_setup_path(dockerfile):
    """Where the Dockerfile's runtime stage puts deploy/node-setup.sh, or None."""
    m = re.search(r"^COPY\s+deploy/node-setup\.sh\s+(\S+)\s*$", "\n".join(
        dockerfile_last_stage(dockerfile)), re.M)
    return m.group(1) if m else None


def node_setup_verb(c, path):
    """`up`, `hold`, ... when the container runs deploy/node-setup.sh (at path), else None."""
    cmd = as_list(c.get("command")) + as_list(c.get("args"))
    return cmd[1] if path and len(cmd) >= 2 and cmd[0] == path else None


def env_of(c):
    return {e.get("name"): str(e.get("value", "")) for e in c.get("env") or []}


def http_paths(src):
    return set(re.findall(r'path_is\(path, plen, "(/[a-z]+)"\)', src))


def config_default(config_src, key):
    """A default from control/config/config_default.c (cfg->KEY = N;), or raises ValueError."""
    m = re.search(r"cfg->%s = (\d+);" % re.escape(key), config_src)
    if not m:
        raise ValueError(f"no default of {key} in control/config/config_default.c")
    return int(m.group(1))


def default_http_listen(config_src):
    m = re.search(r'char ndc_config_default_http\[\] = "([^"]+)";', config_src)
    return m.group(1) if m else None


# ---- helpers ---------------------------------------------------------------------------------


def hostport(s):
    """'1.2.3.4:53', '[v6]:53', '1.2.3.4' or a bare v6 -> (ipaddress, port)."""
    s = str(s)
    m = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?", s)
    if m:
        return ipaddress.ip_address(m.group(1)), int(m.group(2) or 53)
    if s.count(":") == 1:
        h, p = s.split(":")
        return ipaddress.ip_address(h), int(p)
    return ipaddress.ip_address(s), 53


def as_list(v):
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def labels_match(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def mount_covers(mounts, path):
    """The volumeMount whose mountPath holds path, or None."""
    best = None
    for m in mounts:
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best["mountPath"]):
                best = m
    return best


def dockerfile_from(text, stage_lines):
    """The image a stage starts from, ${ARG} and $ARG replaced by the global ARG defaults."""
    lines = re.sub(r"\\\n", " ", text).splitlines()
    first = next((i for i, l in enumerate(lines) if re.match(r"\s*FROM\s", l, re.I)), 0)
    args = {}
    for l in lines[:first]:
        m = re.match(r"\s*ARG\s+(\w+)=(\S+)", l, re.I)
        if m:
            args[m.group(1)] = m.group(2).strip("\"'")
    frm = next((l.split()[1] for l in stage_lines if re.match(r"\s*FROM\s", l, re.I)), "")
    return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), frm)


def dockerfile_last_stage(text):
    lines = re.sub(r"\\\n", " ", text).splitlines()
    starts = [i for i, l in enumerate(lines) if re.match(r"\s*FROM\s", l, re.I)]
    return lines[starts[-1]:] if starts else []


def run_agent_check(ndcache, cfg_text):
    """(errors) from `ndcache --check-config` on the embedded config."""
    errors = []
    with tempfile.TemporaryDirectory(prefix="ndc-manifests.") as d:
        cfg = os.path.join(d, CONFIG_KEY)
        with open(cfg, "w", encoding="utf-8") as f:
            f.write(cfg_text)
        # A kubeconfig for a server that is never contacted: --check-config only parses. It
        # replaces the in-cluster source, whose files exist only inside a pod.
        kc = os.path.join(d, "kubeconfig")
        with open(kc, "w", encoding="utf-8") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443', "
                    "insecure-skip-tls-verify: true}}]\n"
                    "users: [{name: u, user: {token: check}}]\n"
                    "contexts: [{name: c, context: {cluster: c, user: u}}]\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE_")}
        p = subprocess.run([ndcache, "--config", cfg, "--kubeconfig", kc, "--check-config"],
                           capture_output=True, text=True, env=env, timeout=30)
        if p.returncode != 0 or "configuration ok" not in p.stdout:
            reason = (p.stderr.strip().splitlines() or ["no message"])[-1]
            errors.append(f"ConfigMap {CONFIG_KEY}: rejected by ndcache --check-config "
                          f"(exit {p.returncode}): {reason}")
            return errors
        # Without --kubeconfig and outside a pod the in-cluster source must be what fails: this
        # proves the agent reads the config as "in-cluster", not as the embedded sample cluster.
        p = subprocess.run([ndcache, "--config", cfg, "--check-config"], capture_output=True,
                           text=True, env=env, timeout=30)
        if p.returncode == 0 or "KUBERNETES_SERVICE_HOST" not in p.stderr:
            errors.append(f"ConfigMap {CONFIG_KEY}: the agent does not use the in-cluster "
                          f"source with this config (outside a pod it said: "
                          f"{(p.stdout + p.stderr).strip()[:200]})")
    return errors


def check_hold(h, agent, pod, volumes, listen, err):
    """The node-setup container (transparent mode) can do its job and leave when it must."""
    name = f"node-setup container {h['name']}"
    env = env_of(h)
    addrs = {ipaddress.ip_address(a) for a in env.get("NDC_NODE_LOCAL_ADDRESS", "").split()}
    if addrs != listen:
        err(f"{name}: NDC_NODE_LOCAL_ADDRESS {sorted(map(str, addrs))} != config listen "
            f"{sorted(map(str, listen))}: its rules and its look for a successor would miss some")
    sc = h.get("securityContext") or {}
    uid = sc.get("runAsUser", (pod.get("securityContext") or {}).get("runAsUser"))
    if uid != 0:
        err(f"{name}: must set runAsUser: 0 (iptables and nft run as root; the image's USER is "
            f"the agent's, and Kubernetes gives a non-root process no capabilities)")
    added = {c.upper().removeprefix("CAP_") for c in as_list((sc.get("capabilities") or {}).get("add"))}
    if added != {"NET_ADMIN", "NET_RAW"}:
        err(f"{name}: capabilities.add {sorted(added)}: needs exactly NET_ADMIN (netfilter, "
            f"addresses) and NET_RAW (iptables-legacy talks to the kernel through a raw socket)")
    lock = mount_covers(h.get("volumeMounts") or [], "/run/xtables.lock")
    if not lock or (volumes.get(lock["name"], {}).get("hostPath") or {}).get(
            "path") != "/run/xtables.lock":
        err(f"{name}: needs the host's /run/xtables.lock mounted at /run/xtables.lock (the lock "
            f"iptables-legacy shares with kube-proxy; the root filesystem is read-only)")
    pre = ((agent.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}
    if not pre.get("command"):
        err(f"agent: no preStop hook beside the {name}: it decides on SIGTERM whether a "
            f"successor has joined this agent, which must still run then (an exec of sleep)")


# ---- the check -------------------------------------------------------------------------------


def check(inp, run_agent=True):
    errors = []
    err = errors.append

    try:
        docs = [d for d in yaml.load_all(inp.manifest, Loader=UniqueKeyLoader) if d is not None]
    except yaml.YAMLError as e:
        return [f"{inp.manifest_path}: does not parse: {e}"]

    by_kind = {}
    namespaces = set()
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            err(f"document {i + 1}: not a mapping")
            continue
        av, kind = d.get("apiVersion"), d.get("kind")
        name = (d.get("metadata") or {}).get("name")
        if (av, kind) not in KNOWN_KINDS:
            err(f"document {i + 1}: unknown apiVersion/kind {av}/{kind}")
        if not name:
            err(f"document {i + 1} ({kind}): no metadata.name")
        if kind in CLUSTER_SCOPED:
            if "namespace" in d["metadata"]:
                err(f"{kind}/{name}: cluster-scoped but has a namespace")
        else:
            namespaces.add((d.get("metadata") or {}).get("namespace"))
        if (kind, name) in {(k, n) for k, lst in by_kind.items() for n in lst}:
            err(f"{kind}/{name}: defined twice")
        by_kind.setdefault(kind, {})[name] = d
    if len(namespaces) != 1 or None in namespaces:
        err(f"namespaced objects must share one explicit namespace, found {sorted(map(str, namespaces))}")
    namespace = next(iter(namespaces)) if namespaces else None
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Service",
                 "DaemonSet"):
        if kind not in by_kind:
            err(f"no {kind}")
    if errors:
        return errors

    # -- DaemonSet basics ----------------------------------------------------------------------
    dss = list(by_kind["DaemonSet"].values())
    if len(dss) != 1:
        return errors + [f"expected one DaemonSet, found {len(dss)}"]
    ds = dss[0]
    spec = ds["spec"]
    tmpl = spec.get("template", {})
    pod = tmpl.get("spec", {})
    tlabels = (tmpl.get("metadata") or {}).get("labels") or {}
    sel = (spec.get("selector") or {}).get("matchLabels") or {}
    if not sel or not labels_match(sel, tlabels):
        err(f"DaemonSet: selector {sel} does not match the template labels {tlabels}")
    if (spec.get("selector") or {}).get("matchExpressions"):
        err("DaemonSet: matchExpressions are not checked; use matchLabels")
    if pod.get("hostNetwork") is not True:
        err("DaemonSet: hostNetwork must be true (node-local address, pod veths, link watch)")
    if pod.get("dnsPolicy") != "Default":
        err(f"DaemonSet: dnsPolicy must be Default (not {pod.get('dnsPolicy')}): the agent "
            f"must not resolve through cluster DNS")
    if pod.get("priorityClassName") != "system-node-critical":
        err("DaemonSet: priorityClassName must be system-node-critical")
    if not any(t.get("operator") == "Exists" and not t.get("key") and not t.get("effect")
               for t in pod.get("tolerations") or []):
        err("DaemonSet: needs a toleration {operator: Exists} (every taint)")
    us = spec.get("updateStrategy") or {}
    ru = us.get("rollingUpdate") or {}
    if us.get("type") != "RollingUpdate":
        err("DaemonSet: updateStrategy.type must be RollingUpdate")
    # Upgrades overlap (control/handover.c): the new agent takes over before the old one stops.
    if str(ru.get("maxSurge", 0)) in ("0", "0%"):
        err("DaemonSet: maxSurge must be 1: the new agent takes over from the old one on the "
            "node before it stops (without surge DNS on the node has a gap on every upgrade)")
    if str(ru.get("maxUnavailable", 1)) not in ("0", "0%"):
        err("DaemonSet: maxUnavailable must be 0: an upgrade must never leave a node without "
            "an agent")
    for c in pod.get("containers") or []:
        if c.get("ports"):
            err(f"DaemonSet: container {c['name']} declares ports: with hostNetwork they are "
                f"host ports and the surge pod could not be scheduled next to the old one")

    containers = {c["name"]: c for c in pod.get("containers") or []}
    inits = {c["name"]: c for c in pod.get("initContainers") or []}
    # The agent runs the image's ENTRYPOINT (or the binary itself); beside it, only the
    # node-setup container of the transparent mode (deploy/node-setup.sh hold).
    setup_path = node_setup_path(inp.dockerfile)
    verb = lambda c: node_setup_verb(c, setup_path)
    agents = [c for c in containers.values() if verb(c) is None and
              (not c.get("command") or as_list(c["command"])[0].endswith("/ndcache"))]
    holds = [c for c in containers.values() if verb(c) == "hold"]
    others = [c["name"] for c in containers.values() if c not in agents and c not in holds]
    if len(agents) != 1 or others:
        return errors + [f"DaemonSet: expected one agent container (the image's ENTRYPOINT) and "
                         f"at most a node-setup container running `node-setup.sh hold`, found "
                         f"{list(containers)}"]
    agent = agents[0]
    for c in list(inits.values()) + holds:
        cmd = as_list(c.get("command"))
        if cmd and "node-setup.sh" in cmd[0] and cmd[0] != setup_path:
            err(f"container {c['name']}: runs {cmd[0]}, which the Dockerfile does not put in the "
                f"image (it copies deploy/node-setup.sh to {setup_path or 'nowhere'})")
    for c in list(containers.values()) + list(inits.values()):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            err(f"container {c['name']}: privileged")
        caps = sc.get("capabilities") or {}
        if "ALL" not in as_list(caps.get("drop")):
            err(f"container {c['name']}: capabilities.drop must include ALL")
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    mounts = agent.get("volumeMounts") or []
    for c in list(containers.values()) + list(inits.values()):
        for m in c.get("volumeMounts") or []:
            if m["name"] not in volumes:
                err(f"container {c['name']}: volumeMount {m['name']} has no volume")

    # -- ConfigMap and the embedded config ----------------------------------------------------
    cm_vols = [v for v in volumes.values() if "configMap" in v]
    cfg_mount = None
    for v in cm_vols:
        for m in mounts:
            if m["name"] == v["name"]:
                cfg_mount = (m, v)
    if not cfg_mount:
        return errors + ["DaemonSet: the agent container mounts no ConfigMap"]
    m, v = cfg_mount
    cm_name = v["configMap"]["name"]
    cm = by_kind["ConfigMap"].get(cm_name)
    if not cm:
        return errors + [f"DaemonSet: volume {v['name']} names ConfigMap {cm_name}, "
                         f"which is not defined"]
    cfg_text = (cm.get("data") or {}).get(CONFIG_KEY)
    if not isinstance(cfg_text, str):
        return errors + [f"ConfigMap {cm_name}: no string key {CONFIG_KEY}"]
    items = v["configMap"].get("items")
    file_in_volume = CONFIG_KEY
    if items:
        match = [it for it in items if it["key"] == CONFIG_KEY]
        if not match:
            err(f"DaemonSet: volume {v['name']} does not project key {CONFIG_KEY}")
        else:
            file_in_volume = match[0]["path"]
    if m.get("subPath"):
        config_path = m["mountPath"] if m["subPath"] == file_in_volume else None
        # kubelet never updates a subPath mount: the agent's reload would not see a change.
        err(f"DaemonSet: the config is mounted with subPath {m['subPath']}: kubelet does not "
            f"update subPath mounts, so a ConfigMap change would never reach the agent (mount "
            f"the directory; control/reload/ watches it)")
    else:
        config_path = m["mountPath"].rstrip("/") + "/" + file_in_volume
    try:
        cfg = yaml.load(cfg_text, Loader=UniqueKeyLoader) or {}
    except yaml.YAMLError as e:
        return errors + [f"ConfigMap {cm_name} {CONFIG_KEY}: not YAML: {e}"]
    if run_agent:
        errors += run_agent_check(inp.ndcache, cfg_text)
    for key in ("listen", "upstream", "source", "http", "dataplane"):
        if key not in cfg:
            err(f"ConfigMap {CONFIG_KEY}: state `{key}` explicitly (its default does not fit "
                f"a cluster)")
    if errors:
        return errors

    # -- the stop of an upgrade against the grace period (control/agent/upgrade.c) -------------
    # Told to stop, an agent waits upgrade.join_wait_ms for a successor to join, then up to
    # upgrade.wait_s for its takeover, then answers what it has upstream (forward.timeout_ms per
    # upstream and once more, and 500 ms). A kubelet that kills it first cuts the wait short.
    up = cfg.get("upgrade") or {}
    fw = cfg.get("forward") or {}
    try:
        wait_s = int(up.get("wait_s", config_default(inp.config_c, "upgrade.wait_s")))
        join_ms = int(up.get("join_wait_ms", config_default(inp.config_c, "upgrade.join_wait_ms")))
        fwd_ms = int(fw.get("timeout_ms", config_default(inp.config_c, "forward.timeout_ms")))
    except (TypeError, ValueError) as e:
        wait_s = join_ms = fwd_ms = None
        err(f"ConfigMap {CONFIG_KEY}: upgrade.wait_s, upgrade.join_wait_ms, forward.timeout_ms: "
            f"{e}")
    if wait_s is not None:
        n_up = max(1, len(as_list(cfg.get("upstream"))))
        need_s = join_ms / 1000 + wait_s + (fwd_ms * (n_up + 1) + 500) / 1000
        grace = pod.get("terminationGracePeriodSeconds", 30)  # Kubernetes' default
        if not isinstance(grace, int) or grace < need_s:
            err(f"DaemonSet: terminationGracePeriodSeconds {grace} is below what an agent may "
                f"take to stop in an upgrade: upgrade.join_wait_ms {join_ms} + upgrade.wait_s "
                f"{wait_s} s + the queries still upstream ({n_up} upstream(s) of "
                f"forward.timeout_ms {fwd_ms}) = {need_s:.1f} s")

    # -- source, mounts, service account ------------------------------------------------------
    src = cfg.get("source") or {}
    k8s_src = src.get("kubernetes", None) if "kubernetes" in src else None
    if "kubernetes" not in src:
        err(f"ConfigMap {CONFIG_KEY}: source must be `kubernetes` (the in-cluster API)")
    elif k8s_src and k8s_src.get("kubeconfig"):
        if not mount_covers(mounts, k8s_src["kubeconfig"]):
            err(f"source.kubernetes.kubeconfig {k8s_src['kubeconfig']} is not on any mount")
    else:
        sa_name = pod.get("serviceAccountName")
        sa = by_kind["ServiceAccount"].get(sa_name)
        if not sa:
            err(f"DaemonSet: serviceAccountName {sa_name} is not defined here")
        if pod.get("automountServiceAccountToken") is False or (
                sa and sa.get("automountServiceAccountToken") is False
                and pod.get("automountServiceAccountToken") is not True):
            err(f"in-cluster source needs the service-account token mounted at {SA_DIR}")
        if mount_covers(mounts, SA_DIR):
            err(f"a volumeMount hides the service-account directory {SA_DIR}")
    if src.get("snapshot") and not mount_covers(mounts, src["snapshot"]):
        err(f"source.snapshot {src['snapshot']} is not on any mount")

    # -- RBAC against the client --------------------------------------------------------------
    try:
        kinds = client_kinds(inp.k8s_client)
    except ValueError as e:
        return errors + [str(e)]
    if not kinds:
        return errors + ["control/k8s/k8s_stream.c: no kinds table found (update the check)"]
    entries = set(re.findall(r'^\s*\[(NDC_K8S_\w+)\]\s*=\s*\{', inp.k8s_client, re.M))
    if entries - set(kinds):
        return errors + [f"control/k8s/k8s_stream.c: kinds table entries this check cannot read: "
                         f"{sorted(entries - set(kinds))} (update check_manifests.py)"]
    cond = conditional_kinds(inp.agent)
    wanted = {kinds[e] for e in kinds if e not in cond or condition_holds(cond[e], cfg)}
    conditional = {kinds[e][:2] for e in cond}
    # Cluster-wide collections come from the ClusterRole; a named object in one namespace from
    # a Role there, by resourceNames.
    required = {k[:2] for k in wanted if k[2] is None}
    named = {k for k in wanted if k[2] is not None}
    verbs = client_verbs(inp.k8s_client)
    sa = pod.get("serviceAccountName")
    binds_sa = lambda b: any(s.get("kind") == "ServiceAccount" and s.get("name") == sa
                             and s.get("namespace") == namespace for s in b.get("subjects") or [])
    crs = by_kind["ClusterRole"]
    crbs = [b for b in by_kind["ClusterRoleBinding"].values() if binds_sa(b)]
    if not crbs:
        err(f"no ClusterRoleBinding for ServiceAccount {namespace}/{sa}")
    granted = {}
    for b in crbs:
        ref = b.get("roleRef") or {}
        if ref.get("kind") != "ClusterRole" or ref.get("name") not in crs:
            err(f"ClusterRoleBinding {b['metadata']['name']}: roleRef {ref} is not a "
                f"ClusterRole defined here")
            continue
        for rule in crs[ref["name"]].get("rules") or []:
            if rule.get("resourceNames") or rule.get("nonResourceURLs"):
                err(f"ClusterRole {ref['name']}: resourceNames/nonResourceURLs are not expected")
            for g in as_list(rule.get("apiGroups")):
                for r in as_list(rule.get("resources")):
                    granted.setdefault((g, r), set()).update(as_list(rule.get("verbs")))
    fmt = lambda gr: f"{gr[1]}.{gr[0]}" if gr[0] else gr[1]
    # A kind listed per node needs the node's name: env NODE_NAME from the downward API.
    by_node = sorted(e for e in client_node_kinds(inp.k8s_client)
                     if e in kinds and (e not in cond or condition_holds(cond[e], cfg)))
    if by_node:
        node_env = [e for e in agent.get("env") or [] if e.get("name") == "NODE_NAME"]
        ref = ((node_env[0].get("valueFrom") or {}).get("fieldRef") or {}) if node_env else {}
        if ref.get("fieldPath") != "spec.nodeName":
            err(f"agent: needs env NODE_NAME from fieldRef spec.nodeName (the downward API): the "
                f"client lists {', '.join(by_node)} with fieldSelector=spec.nodeName=<NODE_NAME>")
    for gr in sorted(required):
        if gr not in granted:
            err(f"RBAC: the agent lists and watches {fmt(gr)} (control/k8s/k8s_client.c) but the "
                f"ClusterRole does not grant it")
        elif granted[gr] != verbs:
            err(f"RBAC: {fmt(gr)}: verbs {sorted(granted[gr])}, the client needs exactly "
                f"{sorted(verbs)}")
    for gr in sorted(set(granted) - required):
        why = (" (records.pods is not verified)" if gr in conditional else "")
        if any(k[:2] == gr for k in named):
            why = " cluster-wide (it reads one object by name: a Role with resourceNames)"
        err(f"RBAC: grants {fmt(gr)}, which the agent does not request{why}")
    # Roles: (namespace, group, resource, name) -> verbs, from the Roles bound to the agent.
    roles = by_kind.get("Role", {})
    role_grants = {}
    for b in (b for b in by_kind.get("RoleBinding", {}).values() if binds_sa(b)):
        ref = b.get("roleRef") or {}
        rns = b["metadata"].get("namespace")
        role = roles.get(ref.get("name"))
        if ref.get("kind") != "Role" or not role or role["metadata"].get("namespace") != rns:
            err(f"RoleBinding {b['metadata']['name']}: roleRef {ref} is not a Role defined here "
                f"in {rns}")
            continue
        for rule in role.get("rules") or []:
            names = as_list(rule.get("resourceNames"))
            for g in as_list(rule.get("apiGroups")):
                for r in as_list(rule.get("resources")):
                    for n in names or [None]:
                        role_grants.setdefault((rns, g, r, n), set()).update(
                            as_list(rule.get("verbs")))
    for group, resource, ns, name in sorted(named, key=str):
        key = (ns, group, resource, name)
        what = f"{fmt((group, resource))} {ns}/{name}"
        if key not in role_grants:
            err(f"RBAC: the agent lists and watches {what} by name (control/k8s/k8s_stream.c) "
                f"but no Role in {ns} bound to {namespace}/{sa} grants it with resourceNames: "
                f"[{name}]")
        elif role_grants[key] != verbs:
            err(f"RBAC: {what}: verbs {sorted(role_grants[key])}, the client needs exactly "
                f"{sorted(verbs)}")
    for key in sorted(set(role_grants) - {(k[2], k[0], k[1], k[3]) for k in named}, key=str):
        rns, g, r, n = key
        why = (" by every name (no resourceNames)" if n is None else
               " (source.kubernetes.kube_dns_configmap is false)" if (g, r) in conditional
               else "")
        err(f"RBAC: a Role in {rns} grants {fmt((g, r))}{'/' + n if n else ''}, which the "
            f"agent does not request{why}")

    # -- addresses: listen, upstream Service, init container ----------------------------------
    listen = {hostport(a)[0] for a in as_list(cfg.get("listen"))}
    port = int(cfg.get("port", 53))
    init_addrs = set()
    for c in inits.values():
        for e in c.get("env") or []:
            if e.get("name") == "NDC_NODE_LOCAL_ADDRESS":
                init_addrs |= {ipaddress.ip_address(a) for a in str(e["value"]).split()}
    if init_addrs != listen:
        err(f"init container NDC_NODE_LOCAL_ADDRESS {sorted(map(str, init_addrs))} != config "
            f"listen {sorted(map(str, listen))}: the agent binds addresses nobody added")
    # An address that is not link-local is the kube-dns ClusterIP of the transparent mode
    # (deploy/overlays/transparent): kube-proxy DNATs it, so what the kernel passes to the
    # agent's sockets reaches them only with the NOTRACK rules the node-setup container keeps.
    for a in listen:
        if not (a.is_link_local or a.is_loopback) and not holds:
            err(f"listen {a}: not link-local (169.254.0.0/16, fe80::/10); a kube-dns ClusterIP "
                f"there (transparent mode) needs the node-setup container (node-setup.sh hold: "
                f"NOTRACK rules), or kube-proxy DNATs the queries the sockets should get")
    for h in holds:
        check_hold(h, agent, pod, volumes, listen, err)
    upstreams = [hostport(u) for u in as_list(cfg.get("upstream"))]
    for ip, _ in upstreams:
        if ip in listen:
            err(f"config upstream {ip} is also a listen address: misses would come back to the "
                f"agent (a forwarding loop); the upstream is the kube-dns-upstream Service")
    if not upstreams:
        err("config upstream is empty: names outside the cluster domain would fail")
    svcs = by_kind["Service"]
    up_svc = svcs.get("kube-dns-upstream")
    if not up_svc:
        err("no Service kube-dns-upstream")
    else:
        sspec = up_svc["spec"]
        ips = {ipaddress.ip_address(i) for i in as_list(sspec.get("clusterIPs"))
               + as_list(sspec.get("clusterIP")) if i and i != "None"}
        sports = {(p["port"], p.get("protocol", "TCP")) for p in sspec.get("ports") or []}
        for ip, p in upstreams:
            if ip not in ips:
                err(f"config upstream {ip}: not the kube-dns-upstream ClusterIP "
                    f"{sorted(map(str, ips)) or '(none set)'}")
            if (p, "UDP") not in sports or (p, "TCP") not in sports:
                err(f"Service kube-dns-upstream: needs port {p} over UDP and TCP (TC retries)")
        if (sspec.get("selector") or {}).get("k8s-app") != "kube-dns":
            err("Service kube-dns-upstream: must select k8s-app: kube-dns")
        if labels_match(sspec.get("selector"), tlabels):
            err("Service kube-dns-upstream selects the ndcache pods: it would forward to itself")

    # -- capabilities, user, mounts for the fast path -----------------------------------------
    sc = agent.get("securityContext") or {}
    added = {c.upper().removeprefix("CAP_") for c in as_list((sc.get("capabilities") or {}).get("add"))}
    mode = (cfg.get("dataplane") or {}).get("mode", "tc")
    uid = sc.get("runAsUser", pod.get("securityContext", {}).get("runAsUser"))
    if mode in ("tc", "xdp"):
        if not ({"BPF", "PERFMON"} <= added or "SYS_ADMIN" in added):
            err(f"agent: dataplane.mode {mode} needs BPF and PERFMON (or SYS_ADMIN) in "
                f"capabilities.add: the verifier refuses the program without PERFMON")
        if "NET_ADMIN" not in added:
            err(f"agent: dataplane.mode {mode} needs NET_ADMIN (tc/XDP attach)")
        bpf_mount = [mm for mm in mounts if mm["mountPath"].rstrip("/") == "/sys/fs/bpf"]
        if not bpf_mount or (volumes[bpf_mount[0]["name"]].get("hostPath") or {}).get(
                "path", "").rstrip("/") != "/sys/fs/bpf":
            err("agent: dataplane.mode needs the host's /sys/fs/bpf mounted at /sys/fs/bpf")
    if uid != 0 and port < 1024 and "NET_BIND_SERVICE" not in added:
        err(f"agent: runs as uid {uid} and binds port {port}: needs NET_BIND_SERVICE")
    extra = added - {"BPF", "PERFMON", "NET_ADMIN", "NET_BIND_SERVICE", "SYS_ADMIN"}
    if extra:
        err(f"agent: capabilities the agent does not use: {sorted(extra)}")
    if uid not in (None, 0):
        if sc.get("allowPrivilegeEscalation") is False:
            err("agent: non-root with allowPrivilegeEscalation false gets no capabilities "
                "(no_new_privs ignores the image's file capabilities)")
        for c in inits.values():
            for e in c.get("env") or []:
                if e.get("name") == "NDC_UID" and str(e["value"]) != str(uid):
                    err(f"init container NDC_UID {e['value']} != agent runAsUser {uid}: the "
                        f"pin directory would belong to someone else")

    # -- probes and metrics against http.c and http.listen ------------------------------------
    paths = http_paths(inp.http)
    hl = (cfg.get("http") or {}).get("listen") or default_http_listen(inp.config_c)
    hip, hport = hostport(hl)
    named = {p.get("name"): p["containerPort"] for p in agent.get("ports") or []}
    for probe, want in (("livenessProbe", "/health"), ("readinessProbe", "/ready")):
        pr = agent.get(probe)
        if not pr or "httpGet" not in pr:
            err(f"agent: no httpGet {probe}")
            continue
        g = pr["httpGet"]
        p = named.get(g.get("port"), g.get("port"))
        if g.get("path") != want or want not in paths:
            err(f"agent: {probe} path {g.get('path')}: must be {want} (control/http/http.c serves "
                f"{sorted(paths)})")
        if p != hport:
            err(f"agent: {probe} port {g.get('port')} != http.listen port {hport}")
        if g.get("scheme", "HTTP") != "HTTP":
            err(f"agent: {probe}: the agent serves plain HTTP")
        if not hip.is_unspecified and str(g.get("host", "")) != str(hip):
            err(f"agent: {probe}: http.listen is {hl}; without `host: {hip}` kubelet probes "
                f"the node IP and fails")
    ann = (tmpl.get("metadata") or {}).get("annotations") or {}
    if "prometheus.io/port" in ann and str(ann["prometheus.io/port"]) != str(hport):
        err(f"prometheus.io/port {ann['prometheus.io/port']} != http.listen port {hport}")
    res = agent.get("resources") or {}
    if not (res.get("requests") or {}).get("memory") or not (res.get("limits") or {}).get("memory"):
        err("agent: needs memory requests and limits (system-node-critical pods are evicted last)")

    # -- Dockerfile ---------------------------------------------------------------------------
    stage = dockerfile_last_stage(inp.dockerfile)
    base = dockerfile_from(inp.dockerfile, stage)
    if base.rsplit("/", 1)[-1] != "debian:12":
        err(f"Dockerfile: the runtime stage starts FROM {base or '(none)'}, not debian:12 (the "
            f"libraries the build stage linked against)")
    images = {c.get("image") for c in list(containers.values()) + list(inits.values())}
    if len(images) != 1:
        err(f"DaemonSet: the init container and the agent run different images {sorted(images)}")
    want = f"ndcache:{inp.version}"
    for im in sorted(i for i in images if i):
        if im.rsplit("/", 1)[-1] != want:
            err(f"DaemonSet: image {im} is not {want} (meson.build's version, the tag "
                f"deploy/image.sh builds)")
    ep = [l for l in stage if re.match(r"\s*ENTRYPOINT\s", l, re.I)]
    if not ep:
        err("Dockerfile: no ENTRYPOINT in the runtime stage")
    else:
        try:
            argv = json.loads(ep[-1].split(None, 1)[1])
        except (json.JSONDecodeError, IndexError):
            argv = None
            err("Dockerfile: ENTRYPOINT must be exec form (a JSON array)")
        if argv is not None:
            cmd = as_list(agent.get("command")) or argv
            full = cmd + as_list(agent.get("args"))
            cpath = None
            for i, a in enumerate(full):
                if a == "--config" and i + 1 < len(full):
                    cpath = full[i + 1]
                elif a.startswith("--config="):
                    cpath = a.split("=", 1)[1]
            if cpath != config_path:
                err(f"Dockerfile ENTRYPOINT --config {cpath} != the ConfigMap's path in the "
                    f"container {config_path}")
    user = [l for l in stage if re.match(r"\s*USER\s", l, re.I)]
    duid = user[-1].split()[1].split(":")[0] if user else "0"
    if uid is not None and str(uid) != duid:
        err(f"Dockerfile USER {duid} != DaemonSet runAsUser {uid}")
    m = re.search(r"setcap\s+(\S+)=ep\s", "\n".join(stage))
    file_caps = {c.upper().removeprefix("CAP_") for c in m.group(1).split(",")} if m else set()
    if uid not in (None, 0) and file_caps != added:
        err(f"Dockerfile setcap {sorted(file_caps)} != DaemonSet capabilities.add "
            f"{sorted(added)}: a file capability outside the bounding set makes execve fail "
            f"(EPERM), and one missing from the file is never raised for a non-root agent")
    if "deploy/deps.sh build" not in inp.dockerfile:
        err("Dockerfile: the build stage must install with deploy/deps.sh build")
    return errors


# ---- self-test -------------------------------------------------------------------------------


def _docs(inp):
    return list(yaml.safe_load_all(inp.manifest))


def _put(inp, docs):
    inp.manifest = yaml.safe_dump_all(docs, sort_keys=False)


def _find(docs, kind, name=None):
    return next(d for d in docs if d and d["kind"] == kind
                and (name is None or d["metadata"]["name"] == name))


def _edit(fn):
    def mutate(inp):
        docs = _docs(inp)
        fn(docs)
        _put(inp, docs)
    return mutate


def _agent_c(docs):
    return _find(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]


def _set_cfg(key_path, value):
    def fn(docs):
        cm = _find(docs, "ConfigMap")
        cfg = yaml.safe_load(cm["data"][CONFIG_KEY])
        node = cfg
        for k in key_path[:-1]:
            node = node.setdefault(k, {})
        node[key_path[-1]] = value
        cm["data"][CONFIG_KEY] = yaml.safe_dump(cfg)
    return fn


def _del_cfg(key):
    def fn(docs):
        cm = _find(docs, "ConfigMap")
        cfg = yaml.safe_load(cm["data"][CONFIG_KEY])
        del cfg[key]
        cm["data"][CONFIG_KEY] = yaml.safe_dump(cfg)
    return fn


def _drop_rule_resource(resource):
    def fn(docs):
        for rule in _find(docs, "ClusterRole")["rules"]:
            rule["resources"] = [r for r in rule["resources"] if r != resource]
    return fn


CLUSTER_IP = "10.96.0.10"


def _with_listen(docs, addrs):
    _set_cfg(["listen"], addrs)(docs)
    _find(docs, "DaemonSet")["spec"]["template"]["spec"]["initContainers"][0]["env"][0][
        "value"] = " ".join(addrs)


def _transparent(breakage):
    """The base made transparent by hand (the overlay's DaemonSet patch applied), then broken."""
    def mutate(inp):
        docs = _docs(inp)
        patch = next(d for d in yaml.safe_load_all(open(os.path.join(
            inp.root, "deploy/overlays/transparent/node-setup.yaml"))) if d)["spec"]["template"]
        pod = _find(docs, "DaemonSet")["spec"]["template"]["spec"]
        _with_listen(docs, ["169.254.20.10", CLUSTER_IP])
        extra = {c["name"]: c for c in patch["spec"]["containers"]}
        pod["containers"][0]["lifecycle"] = extra.pop(pod["containers"][0]["name"])["lifecycle"]
        pod["containers"] += list(extra.values())
        pod["volumes"] += patch["spec"]["volumes"]
        breakage(pod)
        _put(inp, docs)
    return mutate


def _hold(pod):
    return next(c for c in pod["containers"] if c.get("command", [""])[-1] == "hold")


MUTATIONS = [
    ("the kube-dns ClusterIP in listen without the node-setup container",
     _edit(lambda d: _with_listen(d, ["169.254.20.10", CLUSTER_IP])), "node-setup container"),
    ("the upstream among the listen addresses",
     _edit(lambda d: _with_listen(d, ["169.254.20.10", "10.96.0.11"])), "forwarding loop"),
    ("the init container runs a node-setup.sh the image does not have",
     lambda inp: setattr(inp, "dockerfile", inp.dockerfile.replace(
         "COPY deploy/node-setup.sh /usr/lib/ndcache/", "COPY deploy/node-setup.sh /usr/lib/ndc/")),
     "does not put"),
    ("transparent: no preStop delay for the agent",
     _transparent(lambda pod: pod["containers"][0].pop("lifecycle")), "preStop"),
    ("transparent: node-setup container without NET_RAW",
     _transparent(lambda pod: _hold(pod)["securityContext"]["capabilities"].__setitem__(
         "add", ["NET_ADMIN"])), "NET_RAW"),
    ("transparent: node-setup container as the image's user",
     _transparent(lambda pod: _hold(pod)["securityContext"].pop("runAsUser")), "runAsUser: 0"),
    ("transparent: no xtables lock shared with kube-proxy",
     _transparent(lambda pod: _hold(pod).pop("volumeMounts")), "xtables.lock"),
    ("transparent: node-setup container watching other addresses",
     _transparent(lambda pod: _hold(pod)["env"][0].__setitem__("value", "169.254.20.10")),
     "NDC_NODE_LOCAL_ADDRESS"),
    ("endpointslices missing from the ClusterRole",
     _edit(_drop_rule_resource("endpointslices")), "endpointslices.discovery.k8s.io"),
    ("a new kind in the client without RBAC",
     lambda inp: setattr(inp, "k8s_client", inp.k8s_client.replace(
         '[NDC_K8S_PODS] =',
         '[NDC_K8S_NODES] = {"/api/v1/nodes", "Node", "v1", "nodes"},\n'
         '    [NDC_K8S_PODS] =')), "nodes"),
    ("the kube-dns ConfigMap's Role missing",
     _edit(lambda d: d.remove(_find(d, "Role"))), "no Role in kube-system"),
    ("the kube-dns ConfigMap's Role without resourceNames (every ConfigMap of kube-system)",
     _edit(lambda d: _find(d, "Role")["rules"][0].pop("resourceNames")), "by every name"),
    ("ConfigMaps granted cluster-wide",
     _edit(lambda d: _find(d, "ClusterRole")["rules"][0]["resources"].append("configmaps")),
     "cluster-wide"),
    ("the ConfigMap's Role with a get the client never uses",
     _edit(lambda d: _find(d, "Role")["rules"][0]["verbs"].append("get")), "verbs"),
    ("kube_dns_configmap: false, the Role still there",
     _edit(_set_cfg(["source", "kubernetes", "kube_dns_configmap"], False)),
     "kube_dns_configmap is false"),
    ("the pods rule missing (the node's pods, pod identity)",
     _edit(_drop_rule_resource("pods")), "lists and watches pods"),
    ("no NODE_NAME for the node's pods",
     _edit(lambda d: _agent_c(d).pop("env")), "NODE_NAME"),
    ("NODE_NAME from another field",
     _edit(lambda d: _agent_c(d)["env"][0]["valueFrom"]["fieldRef"].__setitem__(
         "fieldPath", "metadata.name")), "NODE_NAME"),
    ("a kinds table entry the check cannot read",
     lambda inp: setattr(inp, "k8s_client", inp.k8s_client.replace(
         '[NDC_K8S_PODS] =',
         '[NDC_K8S_NODES] = {"/api/v1/nodes", "Node", "v1", "nodes", NULL, false, 1},\n'
         '    [NDC_K8S_PODS] =')), "cannot read"),
    ("a get verb the client never uses",
     _edit(lambda d: _find(d, "ClusterRole")["rules"][0]["verbs"].append("get")), "verbs"),
    ("a config key the agent rejects",
     _edit(_set_cfg(["records", "ttl"], "forever")), "rejected by ndcache --check-config"),
    ("no source section (the agent would serve the sample cluster)",
     _edit(_del_cfg("source")), "does not use the in-cluster source"),
    ("selector not matching the template labels",
     _edit(lambda d: _find(d, "DaemonSet")["spec"]["selector"]["matchLabels"].__setitem__(
         "app.kubernetes.io/name", "other")), "selector"),
    ("liveness probe on a path http.c does not serve",
     _edit(lambda d: _agent_c(d)["livenessProbe"]["httpGet"].__setitem__("path", "/healthz")),
     "livenessProbe path"),
    ("readiness probe on another port than http.listen",
     _edit(lambda d: _agent_c(d)["readinessProbe"]["httpGet"].__setitem__("port", 8080)),
     "readinessProbe port"),
    ("http.listen on loopback without a probe host",
     _edit(_set_cfg(["http", "listen"], "127.0.0.1:9254")), "host: 127.0.0.1"),
    ("upstream not the kube-dns-upstream ClusterIP",
     _edit(lambda d: _find(d, "Service", "kube-dns-upstream")["spec"].__setitem__(
         "clusterIP", "10.96.0.99")), "not the kube-dns-upstream ClusterIP"),
    ("init container adds another address than listen",
     _edit(lambda d: _find(d, "DaemonSet")["spec"]["template"]["spec"]["initContainers"][0]
           ["env"][0].__setitem__("value", "169.254.20.11")), "NDC_NODE_LOCAL_ADDRESS"),
    ("NET_ADMIN dropped",
     _edit(lambda d: _agent_c(d)["securityContext"]["capabilities"].__setitem__(
         "add", ["BPF", "PERFMON", "NET_BIND_SERVICE"])), "needs NET_ADMIN"),
    ("PERFMON dropped (the verifier refuses the program)",
     _edit(lambda d: _agent_c(d)["securityContext"]["capabilities"].__setitem__(
         "add", ["BPF", "NET_ADMIN", "NET_BIND_SERVICE"])), "PERFMON"),
    ("privileged container",
     _edit(lambda d: _agent_c(d)["securityContext"].__setitem__("privileged", True)),
     "privileged"),
    ("no /sys/fs/bpf mount",
     _edit(lambda d: _agent_c(d).__setitem__("volumeMounts", [
         m for m in _agent_c(d)["volumeMounts"] if m["mountPath"] != "/sys/fs/bpf"])),
     "/sys/fs/bpf"),
    ("config mounted elsewhere than the ENTRYPOINT reads",
     _edit(lambda d: _agent_c(d)["volumeMounts"][0].__setitem__("mountPath", "/etc/ndc")),
     "ENTRYPOINT --config"),
    ("no surge during rolling update",
     _edit(lambda d: _find(d, "DaemonSet")["spec"]["updateStrategy"]["rollingUpdate"]
           .__setitem__("maxSurge", 0)), "maxSurge"),
    ("a grace period below upgrade.wait_s",
     _edit(lambda d: _find(d, "DaemonSet")["spec"]["template"]["spec"].__setitem__(
         "terminationGracePeriodSeconds", 30)), "terminationGracePeriodSeconds 30"),
    ("an upgrade wait longer than the grace period allows",
     _edit(_set_cfg(["upgrade", "wait_s"], 60)), "upgrade.wait_s 60"),
    ("no grace period at all (Kubernetes' 30 s)",
     _edit(lambda d: _find(d, "DaemonSet")["spec"]["template"]["spec"].pop(
         "terminationGracePeriodSeconds")), "terminationGracePeriodSeconds 30"),
    ("host ports that block the surge pod",
     _edit(lambda d: _agent_c(d).__setitem__("ports", [{"containerPort": 53, "protocol": "UDP"}])),
     "declares ports"),
    ("ndcache pods labelled like kube-dns (the upstream Service would select them)",
     _edit(lambda d: _find(d, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
           .__setitem__("k8s-app", "kube-dns")), "forward to itself"),
    ("Dockerfile setcap list differs from capabilities.add",
     lambda inp: setattr(inp, "dockerfile", inp.dockerfile.replace("cap_perfmon,", "")),
     "setcap"),
    ("Dockerfile runtime stage on another base",
     lambda inp: setattr(inp, "dockerfile", inp.dockerfile.replace(
         "ARG BASE=debian:12", "ARG BASE=debian:13")), "not debian:12"),
    ("image tag not the version in meson.build",
     _edit(lambda d: _agent_c(d).__setitem__("image", "ndcache:0.0.9")), "meson.build"),
    ("Dockerfile ENTRYPOINT reads another config path",
     lambda inp: setattr(inp, "dockerfile", inp.dockerfile.replace(
         '"/etc/ndcache/ndcache.yaml"', '"/etc/ndcache/config.yaml"')), "ENTRYPOINT --config"),
    ("the config mounted with subPath (kubelet never updates it)",
     _edit(lambda d: _agent_c(d)["volumeMounts"][0].update(
         mountPath="/etc/ndcache/ndcache.yaml", subPath="ndcache.yaml")), "subPath"),
    ("a duplicate key in the manifest",
     lambda inp: setattr(inp, "manifest", inp.manifest.replace(
         "      hostNetwork: true\n", "      hostNetwork: true\n      hostNetwork: false\n", 1)),
     "duplicate key"),
    ("an unknown kind",
     lambda inp: setattr(inp, "manifest", inp.manifest + "---\napiVersion: v1\nkind: Servce\n"
                         "metadata: {name: x, namespace: kube-system}\n"), "unknown apiVersion"),
]


def self_test(inp, verbose=False):
    failures = 0
    base = check(inp)
    if base:
        print("self-test: the unmodified inputs must pass first:", *base, sep="\n  ")
        return 1
    for what, mutate, expect in MUTATIONS:
        m = copy.copy(inp)
        mutate(m)
        if (m.manifest, m.dockerfile, m.k8s_client) == (inp.manifest, inp.dockerfile,
                                                         inp.k8s_client):
            print(f"self-test: FAIL {what}: the mutation changed nothing (stale self-test)")
            failures += 1
            continue
        errs = check(m)
        if any(expect in e for e in errs):
            print(f"self-test: ok   {what}")
            if verbose:
                print(*(f"       {e}" for e in errs), sep="\n")
        else:
            print(f"self-test: FAIL {what}: expected an error containing {expect!r}, got "
                  f"{errs or 'none'}")
            failures += 1
    print(f"self-test: {len(MUTATIONS) - failures} of {len(MUTATIONS)} mistakes reported")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ndcache", required=True, help="the built agent (BUILD/control/ndcache)")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--manifest", help="check this file instead of deploy/kubernetes/ndcache.yaml")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="self-test: print each error")
    a = ap.parse_args()
    if not os.access(a.ndcache, os.X_OK):
        print(f"check_manifests: {a.ndcache}: not an executable", file=sys.stderr)
        return 2
    inp = Inputs(os.path.abspath(a.root), os.path.abspath(a.ndcache),
                 a.manifest and os.path.abspath(a.manifest))
    if a.self_test:
        return self_test(inp, a.verbose)
    errs = check(inp)
    for e in errs:
        print(f"check_manifests: {e}")
    print(f"check_manifests: {inp.manifest_path} and Dockerfile: "
          f"{'ok' if not errs else f'{len(errs)} problem(s)'}")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
