#!/usr/bin/env python3
"""Fake Kubernetes API server for ndcache tests (Python standard library only).

Speaks the real wire protocol for what ndcache uses: paginated lists (limit/continue, 410 when the
continue token is older than the compaction point), chunked watch streams from a resourceVersion
with bookmarks, Status bodies for errors, bearer-token and client-certificate auth over TLS.
A plain-HTTP control port on 127.0.0.1 scripts changes and faults. See README.md.
"""

import argparse
import base64
import bisect
import collections
import copy
import datetime
import hmac
import json
import select
import signal
import socket
import ssl
import sys
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# resource (path segment) -> (kind, apiVersion, list kind, group prefix, namespaced)
RESOURCES = {
    "namespaces": ("Namespace", "v1", "NamespaceList", "/api/v1", False),
    "services": ("Service", "v1", "ServiceList", "/api/v1", True),
    "pods": ("Pod", "v1", "PodList", "/api/v1", True),
    "endpointslices": ("EndpointSlice", "discovery.k8s.io/v1", "EndpointSliceList",
                       "/apis/discovery.k8s.io/v1", True),
    # The kube-dns ConfigMap (stubDomains, upstreamNameservers) is one of these.
    "configmaps": ("ConfigMap", "v1", "ConfigMapList", "/api/v1", True),
    # MCS (KEP-1645): served only while its CRD is installed (--no-crd, op "crd").
    "serviceimports": ("ServiceImport", "multicluster.x-k8s.io/v1alpha1", "ServiceImportList",
                       "/apis/multicluster.x-k8s.io/v1alpha1", True),
}
# Resources whose CRD a cluster may lack: a request for one not installed is 404, as it is there.
CRD_RESOURCES = ("serviceimports",)
KINDS = {v[0]: (res,) + v for res, v in RESOURCES.items()}  # kind -> (res, kind, apiVersion, ...)

REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 409: "Conflict", 410: "Expired", 422: "Invalid",
    429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}

FIRST_RV = 100  # rv of an empty store; the first change is 101
HANDSHAKE_TIMEOUT = 10.0
IDLE_TIMEOUT = 120.0  # keep-alive idle and blocked-write limit per connection
DEFAULT_WATCH_TIMEOUT = 1800
POLL = 0.5  # how often an idle watcher checks whether its client went away
SNAPSHOT_CACHE = 64

VERBOSE = False


def log(msg):
    if VERBOSE:
        sys.stderr.write("fakeapi: %s\n" % msg)
        sys.stderr.flush()


def dumps(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def status_body(code, message, reason=None):
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason or REASONS.get(code, "Unknown"), "code": code,
    }


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ControlError(Exception):
    pass


class Watcher:
    """One open watch stream; the control thread may cut its socket (op drop)."""

    def __init__(self, sock):
        self.sock = sock
        self.dropped = False

    def cut(self, rst):
        self.dropped = True
        try:
            if rst:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00"
                                     b"\x00\x00\x00\x00")
            # The base-class shutdown is the plain syscall: no TLS close_notify, no last chunk.
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass


class State:
    def __init__(self, token):
        self.cond = threading.Condition()
        self.rv = FIRST_RV
        self.compact_rv = FIRST_RV
        self.objects = {}  # (kind, ns, name) -> object (never mutated once stored)
        self.history = []  # (rv, type, kind, object, previous object of a MODIFIED), append-only
        self.history_rvs = []
        self.token = token
        self.fail_count = 0
        self.fail_status = 500
        self.fail_path = None
        self.fail_watch = None
        self.pause_until = 0.0
        self.watchers = set()
        self.no_crd = set()  # CRD_RESOURCES not installed (served 404)
        self.stopping = False
        self.snapshots = {}  # (kind, rv) -> sorted object list, for continue pages
        # id(object) -> (object, its list-item JSON): every stored object is encoded once, when
        # it is stored, so a list page is a join of bytes. Serialising on each request made the
        # server, not the client, most of a 100,000-Service sync. The object is kept alongside
        # so its id cannot be reused while the entry exists (history keeps objects anyway).
        self.encoded = {}
        self.list_item_kinds = False
        self.fleet = Fleet()  # issue 25: per-client counters, refusal switches
        self.stats_lock = threading.Lock()
        self.requests = {}
        self.lists = {}
        self.watches = {}
        self.auth_failures = 0
        self.failed = 0
        self.watch_events = 0
        self.bookmarks = 0
        # The last API requests' targets (path?query), oldest first: GET /requests.
        self.recent = collections.deque(maxlen=RECENT_REQUESTS)

    # ---- objects -------------------------------------------------------------------------------

    @staticmethod
    def normalize(obj):
        if not isinstance(obj, dict):
            raise ControlError("object must be a JSON object")
        kind = obj.get("kind")
        if kind not in KINDS:
            raise ControlError("unsupported kind %r (want one of %s)" % (kind, ", ".join(KINDS)))
        obj = copy.deepcopy(obj)
        md = obj.get("metadata")
        if not isinstance(md, dict) or not isinstance(md.get("name"), str) or not md["name"]:
            raise ControlError("metadata.name missing")
        _, _, api_version, _, _, namespaced = KINDS[kind]
        obj["apiVersion"] = api_version
        if namespaced:
            ns = md.get("namespace") or "default"  # as kubectl apply does
            if not isinstance(ns, str):
                raise ControlError("metadata.namespace must be a string")
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
            ns = ""
        return obj, (kind, ns, md["name"])

    def encode_item(self, obj):
        """obj as a list item: without kind/apiVersion, as the real server sends them."""
        if not self.list_item_kinds:
            obj = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        return dumps(obj)

    def item_bytes(self, obj):
        """The list-item JSON of a stored object. Call with cond held."""
        enc = self.encoded.get(id(obj))
        if enc is None or enc[0] is not obj:
            enc = (obj, self.encode_item(obj))
            self.encoded[id(obj)] = enc
        return enc[1]

    def _record(self, etype, kind, obj, prev=None):
        if etype != "DELETED":
            self.item_bytes(obj)
        self.history.append((self.rv, etype, kind, obj, prev))
        self.history_rvs.append(self.rv)
        self.cond.notify_all()

    def apply(self, obj):
        obj, key = self.normalize(obj)
        md = obj["metadata"]
        with self.cond:
            old = self.objects.get(key)
            self.rv += 1
            if old is not None:
                md["uid"] = old["metadata"]["uid"]
                md["creationTimestamp"] = old["metadata"].get("creationTimestamp", now_rfc3339())
            else:
                md["uid"] = md.get("uid") or str(uuid.uuid4())
                md.setdefault("creationTimestamp", now_rfc3339())
            md["resourceVersion"] = str(self.rv)
            self.objects[key] = obj
            self._record("MODIFIED" if old is not None else "ADDED", key[0], obj, old)
            return self.rv

    def delete(self, kind, ns, name):
        if kind not in KINDS:
            raise ControlError("unsupported kind %r" % (kind,))
        if not KINDS[kind][5]:
            ns = ""
        elif not ns:
            ns = "default"
        with self.cond:
            old = self.objects.pop((kind, ns, name), None)
            if old is None:
                raise ControlError("%s %s/%s not found" % (kind, ns, name))
            self.rv += 1
            # The DELETED event carries the last state, stamped with the deletion's rv.
            gone = copy.deepcopy(old)
            gone["metadata"]["resourceVersion"] = str(self.rv)
            self._record("DELETED", kind, gone)
            return self.rv

    def sorted_objects(self, kind):
        """Current objects of kind, sorted by namespace/name. Call with cond held."""
        items = [(k[1], k[2], o) for k, o in self.objects.items() if k[0] == kind]
        items.sort(key=lambda t: (t[0], t[1]))
        return [t[2] for t in items]

    def snapshot_at(self, kind, rv):
        """Objects of kind as they were at rv (for continue pages). Call with cond held."""
        snap = self.snapshots.get((kind, rv))
        if snap is not None:
            return snap
        state = {}
        end = bisect.bisect_right(self.history_rvs, rv)
        for i in range(end):
            erv, etype, ekind, obj, _ = self.history[i]
            if ekind != kind:
                continue
            key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            if etype == "DELETED":
                state.pop(key, None)
            else:
                state[key] = obj
        snap = [state[k] for k in sorted(state)]
        self.remember_snapshot(kind, rv, snap)
        return snap

    def remember_snapshot(self, kind, rv, snap):
        if len(self.snapshots) >= SNAPSHOT_CACHE:
            self.snapshots.pop(next(iter(self.snapshots)))
        self.snapshots[(kind, rv)] = snap

    # ---- stats ---------------------------------------------------------------------------------

    def count(self, table, path):
        with self.stats_lock:
            table[path] = table.get(path, 0) + 1

    def remember_request(self, target):
        with self.stats_lock:
            self.recent.append(target)

    def recent_requests(self):
        with self.stats_lock:
            return list(self.recent)

    def stats(self):
        with self.stats_lock:
            out = {
                "requests": dict(self.requests), "lists": dict(self.lists),
                "watches": dict(self.watches), "auth_failures": self.auth_failures,
                "injected_failures": self.failed, "watch_events": self.watch_events,
                "bookmarks": self.bookmarks,
            }
        with self.cond:
            out["watchers"] = len(self.watchers)
            out["resourceVersion"] = str(self.rv)
            out["compactedResourceVersion"] = str(self.compact_rv)
            out["objects"] = len(self.objects)
            out["paused"] = max(0.0, round(self.pause_until - time.monotonic(), 3))
            out["fail_pending"] = self.fail_count
        out.update(self.fleet.stats())
        return out

    # ---- control -------------------------------------------------------------------------------

    def control(self, req):
        if not isinstance(req, dict):
            raise ControlError("body must be a JSON object")
        op = req.get("op")
        if op == "apply":
            if "object" not in req:
                raise ControlError("apply needs object")
            objs = req["object"]
            if isinstance(objs, dict) and objs.get("kind") == "List":
                objs = objs.get("items", [])
            if isinstance(objs, list):
                for o in objs:
                    self.normalize(o)  # all or nothing
                for o in objs:
                    self.apply(o)
            else:
                self.apply(objs)
        elif op == "delete":
            name = req.get("name")
            if not isinstance(name, str) or not name:
                raise ControlError("delete needs kind, namespace, name")
            self.delete(req.get("kind"), req.get("namespace") or "", name)
        elif op == "compact":
            with self.cond:
                self.compact_rv = self.rv
                self.snapshots.clear()
        elif op == "drop":
            rst = bool(req.get("rst", False))
            with self.cond:
                ws = list(self.watchers)
                for w in ws:
                    w.cut(rst)
                self.cond.notify_all()
        elif op == "token":
            tok = req.get("token")
            if not isinstance(tok, str) or not tok:
                raise ControlError("token needs a non-empty token")
            with self.cond:
                self.token = tok
        elif op == "fail":
            count, code = req.get("count", 1), req.get("status", 500)
            path, watch = req.get("path"), req.get("watch")
            if not isinstance(count, int) or count < 0:
                raise ControlError("count must be an integer >= 0")
            if not isinstance(code, int) or not 400 <= code <= 599:
                raise ControlError("status must be an HTTP error status 400..599")
            if path is not None and not isinstance(path, str):
                raise ControlError("path must be a string")
            if watch is not None and not isinstance(watch, bool):
                raise ControlError("watch must be true or false")
            with self.cond:
                self.fail_count, self.fail_status = count, code
                self.fail_path, self.fail_watch = path, watch
        elif op == "pause":
            secs = req.get("seconds")
            if not isinstance(secs, (int, float)) or secs < 0 or secs > 3600:
                raise ControlError("seconds must be a number in 0..3600")
            with self.cond:
                self.pause_until = time.monotonic() + secs
                self.cond.notify_all()  # pause 0 ends a pause early
        elif op == "crd":
            # Installs or removes a CRD: removing one ends the resource's open watch streams.
            res, served = req.get("resource"), req.get("served")
            if res not in CRD_RESOURCES:
                raise ControlError("resource must be one of %s" % ", ".join(CRD_RESOURCES))
            if not isinstance(served, bool):
                raise ControlError("served must be true or false")
            with self.cond:
                if served:
                    self.no_crd.discard(res)
                else:
                    self.no_crd.add(res)
                    self.cond.notify_all()
        elif op == "reset_stats":
            with self.stats_lock:
                self.requests, self.lists, self.watches = {}, {}, {}
                self.auth_failures = self.failed = self.watch_events = self.bookmarks = 0
                self.recent.clear()
            self.fleet.reset()
        elif op in Fleet.OPS:
            self.fleet.control(req)
        else:
            raise ControlError("unknown op %r" % (op,))
        with self.cond:
            return self.rv

    def wait_unpaused(self):
        with self.cond:
            while not self.stopping:
                left = self.pause_until - time.monotonic()
                if left <= 0:
                    return
                self.cond.wait(left)

    def take_failure(self, path, is_watch):
        with self.cond:
            if self.fail_count <= 0:
                return 0
            if self.fail_path and not path.startswith(self.fail_path):
                return 0
            if self.fail_watch is not None and self.fail_watch != is_watch:
                return 0
            self.fail_count -= 1
            return self.fail_status


# ---- continue tokens --------------------------------------------------------------------------

def encode_continue(path, rv, offset):
    raw = dumps({"v": "meta.k8s.io/v1", "rv": rv, "path": path, "offset": offset})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(tok, path):
    try:
        raw = base64.urlsafe_b64decode(tok + "=" * (-len(tok) % 4))
        d = json.loads(raw)
        rv, off = d["rv"], d["offset"]
        if d.get("path") != path or not isinstance(rv, int) or not isinstance(off, int) \
                or off < 0:
            raise ValueError
        return rv, off
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ValueError("invalid continue token") from None


# ---- selectors --------------------------------------------------------------------------------

def field_value(obj, path):
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def parse_selector(text):
    """k=v, k==v, k!=v, k, !k terms joined by commas. Returns a list of (key, op, value)."""
    terms = []
    for term in filter(None, (t.strip() for t in (text or "").split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            terms.append((k.strip(), "!=", v.strip()))
        elif "==" in term or "=" in term:
            k, v = term.split("==", 1) if "==" in term else term.split("=", 1)
            terms.append((k.strip(), "=", v.strip()))
        elif term.startswith("!"):
            terms.append((term[1:].strip(), "!", None))
        else:
            terms.append((term, "exists", None))
    return terms


def selector_match(obj, fields, labels):
    for k, op, v in fields:
        have = field_value(obj, k)
        have = "" if have is None else str(have)
        if (op == "=") != (have == v):
            return False
    lab = (obj.get("metadata") or {}).get("labels") or {}
    for k, op, v in labels:
        if op == "exists" and k not in lab:
            return False
        if op == "!" and k in lab:
            return False
        if op == "=" and lab.get(k) != v:
            return False
        if op == "!=" and lab.get(k) == v:
            return False
    return True


def selected_event(etype, obj, prev, fields, labels):
    """What a watch with these selectors sees of a change, as the real API server sends it:
    an object that starts to match (a pod bound to the selected node) is ADDED, one that stops
    matching is DELETED (with its new state), a change outside the selection is nothing."""
    now = selector_match(obj, fields, labels)
    if etype != "MODIFIED" or prev is None:
        return (etype, obj) if now else None
    was = selector_match(prev, fields, labels)
    if now:
        return ("MODIFIED" if was else "ADDED", obj)
    return ("DELETED", obj) if was else None


# ---- HTTP ------------------------------------------------------------------------------------

class QuietDisconnect(Exception):
    pass


class QuietServerMixin:
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (OSError, QuietDisconnect, ValueError)):
            log("connection from %s ended: %r" % (client_address, exc))
            return
        traceback.print_exc(file=sys.stderr)


def make_server_class(host):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Server(QuietServerMixin, ThreadingHTTPServer):
        address_family = family

    return Server


class BaseHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # As Go's net/http (the real API server) does. With Nagle on, the body written after the
    # headers waited for the client's delayed ACK: 40 ms per list page, most of a large sync.
    disable_nagle_algorithm = True
    server_version = "fakeapi/1"
    sys_version = ""

    def log_message(self, fmt, *args):
        log("%s %s" % (self.address_string(), fmt % args))

    def send_json(self, code, obj, headers=None):
        self.send_raw_json(code, dumps(obj), headers)

    def send_raw_json(self, code, body, headers=None):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_status(self, code, message, reason=None, headers=None):
        self.send_json(code, status_body(code, message, reason), headers)

    def read_body(self, limit=16 << 20):
        n = int(self.headers.get("Content-Length") or 0)
        if n < 0 or n > limit:
            raise ValueError("body too large")
        return self.rfile.read(n) if n else b""


# ---- the initial state: watch cache, WatchList, per-client counters (issue 25) ----------------
#
# Three ways to get a collection's whole state, as a real API server serves them:
#   stream      watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan (WatchList,
#               KEP-3157): ADDED for every object, then a BOOKMARK annotated
#               k8s.io/initial-events-end: "true" at the state's resourceVersion, then the watch;
#   cache       a list with resourceVersion=0, or resourceVersion=N with NotOlderThan or without a
#               limit: the watch cache (which ignores limit: one page);
#   consistent  a list without resourceVersion, and every continue page: etcd before 1.31.
# Each can be refused (--refuse, op refuse) the way a server without it answers; op
# ignore_initial_events makes the server ignore sendInitialEvents/resourceVersionMatch on a watch
# (a plain watch, as one that knew neither would send). Requests, bytes and watch streams are
# counted per client: bearer token TOKEN.<client> is client <client>, TOKEN itself "-".

WAYS = ("stream", "cache", "consistent")
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
TOO_LARGE_RV_WAIT = 3.0  # the real server waits this long for its cache, then answers 504
INITIAL_CHUNK = 256 << 10  # initial events go out in writes of about this size
RECENT_REQUESTS = 1000  # GET /requests: the last API requests, for tests
CLIENT_COUNTERS = ("requests", "bytes", "lists_consistent", "lists_cache", "lists_exact",
                   "watches", "initial_streams", "refused")


def client_of_token(cred, token):
    """The client a bearer token names: "-" for the token itself, NAME for TOKEN.NAME, else None."""
    if hmac.compare_digest(cred.encode(), token.encode()):
        return "-"
    head, dot, name = cred.rpartition(".")
    if dot and name and hmac.compare_digest(head.encode(), token.encode()) and \
            all(c.isalnum() or c in "-_" for c in name):
        return name
    return None


def initial_events_end(kind, api_version, rv):
    return dumps({"type": "BOOKMARK", "object": {
        "kind": kind, "apiVersion": api_version,
        "metadata": {"resourceVersion": str(rv), "annotations": {INITIAL_EVENTS_END: "true"}}}}) + \
        b"\n"


class Fleet:
    OPS = ("refuse", "ignore_initial_events", "initial_deleted")

    def __init__(self):
        self.lock = threading.Lock()
        self.refuse = set()
        self.ignore_initial_events = False
        self.initial_deleted = 0  # op initial_deleted: streamed states still to break
        self.clients = {}
        self.added = {}  # id(object) -> (object, its ADDED event line), as State.encoded

    def client(self, name):
        with self.lock:
            c = self.clients.get(name)
            if c is None:
                c = self.clients[name] = dict.fromkeys(CLIENT_COUNTERS, 0)
            return c

    def add(self, c, key, n=1):
        if c is not None:
            with self.lock:
                c[key] += n

    def reset(self):
        with self.lock:
            for c in self.clients.values():
                for k in c:
                    c[k] = 0

    def stats(self):
        with self.lock:
            return {"clients": {k: dict(v) for k, v in self.clients.items()},
                    "refuse": sorted(self.refuse),
                    "ignore_initial_events": self.ignore_initial_events,
                    "initial_deleted": self.initial_deleted}

    def take_initial_deleted(self):
        """Whether this streamed initial state gets a DELETED event (op initial_deleted)."""
        with self.lock:
            if self.initial_deleted <= 0:
                return False
            self.initial_deleted -= 1
            return True

    def control(self, req):
        if req["op"] == "refuse":
            ways = req.get("ways", [])
            if not isinstance(ways, list) or any(w not in WAYS for w in ways):
                raise ControlError("ways must be a list of %s" % ", ".join(WAYS))
            with self.lock:
                self.refuse = set(ways)
        elif req["op"] == "initial_deleted":
            count = req.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ControlError("count must be an integer >= 0")
            with self.lock:
                self.initial_deleted = count
        else:
            on = req.get("on")
            if not isinstance(on, bool):
                raise ControlError("on must be true or false")
            with self.lock:
                self.ignore_initial_events = on

    def added_line(self, obj):
        enc = self.added.get(id(obj))
        if enc is None or enc[0] is not obj:
            enc = (obj, dumps({"type": "ADDED", "object": obj}) + b"\n")
            self.added[id(obj)] = enc
        return enc[1]


class CountingWriter:
    """The handler's wfile, counting what goes out to its client."""

    def __init__(self, raw, handler):
        self.raw = raw
        self.handler = handler

    def write(self, data):
        n = self.raw.write(data)
        self.handler.server.state.fleet.add(self.handler.client, "bytes",
                                            len(data) if n is None else n)
        return n

    def __getattr__(self, name):
        return getattr(self.raw, name)


def invalid(field, message):
    """The 422 Status of a ListOptions the real server's validation rejects."""
    body = status_body(422, 'ListOptions.meta.k8s.io "" is invalid: %s: Forbidden: %s' %
                       (field, message), "Invalid")
    body["details"] = {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [
        {"reason": "FieldValueForbidden", "message": "Forbidden: " + message, "field": field}]}
    return body


class InitialStateMixin:
    """ApiHandler's side of the block above."""

    def refused(self, code, body, headers=None):
        self.st.fleet.add(self.client, "refused")
        self.send_json(code, body, headers)

    def list_initial_state(self, params):
        """Checks and counts a list; False when it was answered here."""
        fleet = self.st.fleet
        rv = params.get("resourceVersion", "")
        match = params.get("resourceVersionMatch", "")
        cont = params.get("continue", "")
        if match:
            msg = None
            if not rv:
                msg = "resourceVersionMatch is forbidden unless resourceVersion is provided"
            elif cont:
                msg = "resourceVersionMatch is forbidden when continue is provided"
            elif match not in ("Exact", "NotOlderThan"):
                msg = "resourceVersionMatch %r is not supported" % match
            elif match == "Exact" and rv == "0":
                msg = 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
            if msg:
                self.send_json(422, invalid("resourceVersionMatch", msg))
                return False
        if cont or not rv:
            way, key = "consistent", "lists_consistent"
        elif match == "Exact" or (not match and rv != "0" and params.get("limit", "0") != "0"):
            way, key = "exact", "lists_exact"  # an exact list at an old rv: etcd
        else:
            way, key = "cache", "lists_cache"
        if way in fleet.refuse and way == "cache":
            self.refused(400, status_body(400, "the watch cache is disabled for this resource "
                                          "(fakeapi: refuse cache)", "BadRequest"))
            return False
        if way in fleet.refuse:
            self.refused(429, status_body(429, "too many requests (fakeapi: refuse consistent)"),
                         {"Retry-After": "1"})
            return False
        if way == "cache" and rv != "0":
            try:
                want = int(rv)
            except ValueError:
                self.send_status(400, "invalid resourceVersion")
                return False
            st = self.st
            with st.cond:
                end = time.monotonic() + TOO_LARGE_RV_WAIT
                while st.rv < want and time.monotonic() < end:
                    st.cond.wait(end - time.monotonic())
                cur = st.rv
            if cur < want:
                body = status_body(504, "Too large resource version: %d, current: %d" %
                                   (want, cur), "Timeout")
                body["details"] = {"causes": [{"reason": "ResourceVersionTooLarge",
                                               "message": "Too large resource version"}],
                                   "retryAfterSeconds": 1}
                self.send_json(504, body)
                return False
        if way == "cache":
            params.pop("limit", None)  # the watch cache serves the whole list at once
        fleet.add(self.client, key)
        return True

    def watch_initial_state(self, params):
        """Checks and counts a watch; None when it was answered here, else whether its initial
        state ends with the initial-events-end bookmark (sendInitialEvents=true)."""
        fleet = self.st.fleet
        fleet.add(self.client, "watches")
        if fleet.ignore_initial_events:
            return False
        sie = params.get("sendInitialEvents")
        match = params.get("resourceVersionMatch", "")
        if sie is None:
            if match:
                self.send_json(422, invalid("resourceVersionMatch", "resourceVersionMatch is "
                                            "forbidden for watch unless sendInitialEvents is "
                                            "provided"))
                return None
            return False
        if match != "NotOlderThan":
            self.send_json(422, invalid("resourceVersionMatch", "sendInitialEvents requires "
                                        "setting resourceVersionMatch to NotOlderThan"))
            return None
        if "stream" in fleet.refuse:
            self.refused(422, invalid("sendInitialEvents", "sendInitialEvents is forbidden for "
                                      "watch unless the WatchList feature gate is enabled"))
            return None
        if sie.lower() not in ("true", "1"):
            self.send_status(400, "fakeapi: sendInitialEvents=false is not implemented")
            return None
        fleet.add(self.client, "initial_streams")
        return True

    def write_initial(self, objs, fields, labels):
        """ADDED events for objs, in writes of about INITIAL_CHUNK bytes."""
        fleet = self.st.fleet
        buf, size = [], 0
        for obj in objs:
            if not selector_match(obj, fields, labels):
                continue
            line = fleet.added_line(obj)
            buf.append(line)
            size += len(line)
            if size >= INITIAL_CHUNK:
                self.write_chunk(b"".join(buf))
                buf, size = [], 0
        if buf:
            self.write_chunk(b"".join(buf))


class ApiHandler(InitialStateMixin, BaseHandler):
    def setup(self):
        # A partition (op pause) holds new connections before the TLS handshake, as a lost
        # SYN-ACK would: the client's connect timeout is what fires.
        self.server.state.wait_unpaused()
        # TLS per connection thread, so a client that never finishes its handshake cannot stall
        # accept() for everyone else.
        self.request.settimeout(HANDSHAKE_TIMEOUT)
        try:
            self.request = self.server.sslctx.wrap_socket(self.request, server_side=True)
        except (OSError, ValueError) as e:
            raise QuietDisconnect("TLS handshake: %s" % e) from None
        self.request.settimeout(IDLE_TIMEOUT)
        super().setup()
        self.client = None  # issue 25: the counters of the client this connection serves
        self.wfile = CountingWriter(self.wfile, self)

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        try:
            self.request.close()
        except OSError:
            pass

    def handle(self):
        try:
            super().handle()
        except OSError as e:  # client went away mid-response
            log("client %s: %r" % (self.address_string(), e))
            self.close_connection = True

    @property
    def st(self):
        return self.server.state

    def authenticated(self):
        if self.server.client_ca:
            try:
                if self.request.getpeercert():  # only set when it verified against client-ca
                    self.client = self.st.fleet.client("cert")
                    self.st.fleet.add(self.client, "requests")
                    return True
            except (OSError, ValueError):
                pass
        auth = self.headers.get("Authorization", "")
        scheme, _, cred = auth.partition(" ")
        if scheme.lower() != "bearer" or not cred:
            return False
        with self.st.cond:
            token = self.st.token
        name = client_of_token(cred.strip(), token)
        self.client = None if name is None else self.st.fleet.client(name)
        self.st.fleet.add(self.client, "requests")
        return name is not None

    def do_GET(self):
        try:
            self.serve_get()
        except OSError:
            raise
        except Exception:  # a bug here: say so loudly, but answer like a server would
            traceback.print_exc(file=sys.stderr)
            self.close_connection = True
            self.send_status(500, "fakeapi internal error")

    def serve_get(self):
        url = urlsplit(self.path)
        path = url.path
        st = self.st
        st.count(st.requests, path)
        st.remember_request(self.path)
        try:
            params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        except ValueError:
            params = None
        st.wait_unpaused()
        code = st.take_failure(path, params is not None and
                               params.get("watch", "").lower() in ("true", "1"))
        if code:
            with st.stats_lock:
                st.failed += 1
            headers = {"Retry-After": "1"} if code in (429, 503) else None
            self.send_status(code, "injected failure", headers=headers)
            return
        if not self.authenticated():
            with st.stats_lock:
                st.auth_failures += 1
            self.send_status(401, "Unauthorized")
            return
        if params is None:
            self.send_status(400, "bad query string")
            return
        self.route(path, params)

    def method_not_allowed(self):
        try:
            self.read_body()
        except ValueError:
            self.close_connection = True
        self.st.count(self.st.requests, urlsplit(self.path).path)
        self.send_status(405, "the fake API server is read-only", headers={"Allow": "GET"})

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = method_not_allowed

    def route(self, path, params):
        if path in ("/healthz", "/readyz", "/livez"):
            body = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if path == "/version":
            self.send_json(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0-fakeapi",
                                 "platform": "linux/amd64"})
            return
        parts = [p for p in path.split("/") if p]
        # /api/v1/... or /apis/discovery.k8s.io/v1/...
        if parts[:2] == ["api", "v1"]:
            rest, group = parts[2:], "/api/v1"
        elif parts[:3] == ["apis", "discovery.k8s.io", "v1"]:
            rest, group = parts[3:], "/apis/discovery.k8s.io/v1"
        elif parts[:3] == ["apis", "multicluster.x-k8s.io", "v1alpha1"]:
            rest, group = parts[3:], "/apis/multicluster.x-k8s.io/v1alpha1"
        else:
            self.send_status(404, "the server could not find the requested resource")
            return
        ns, name = None, None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        elif len(rest) == 2 and rest[0] == "namespaces":
            rest, name = ["namespaces"], rest[1]  # GET one Namespace
        if len(rest) == 2 and name is None:
            rest, name = [rest[0]], rest[1]
        res = RESOURCES.get(rest[0]) if len(rest) == 1 else None
        if res is None or res[3] != group or (ns is not None and not res[4]):
            self.send_status(404, "the server could not find the requested resource")
            return
        # A CRD not installed (--no-crd, op "crd"): the API server has no such resource.
        if rest[0] in self.st.no_crd:
            self.st.count(self.st.lists if params.get("watch", "").lower() not in
                          ("true", "1") else self.st.watches, path)
            self.send_status(404, "the server could not find the requested resource")
            return
        if name is not None:
            self.get_one(res, ns or "", name)
        elif params.get("watch", "").lower() in ("true", "1"):
            self.st.count(self.st.watches, path)
            initial_end = self.watch_initial_state(params)  # issue 25
            if initial_end is not None:
                self.watch(path, res, ns, params, initial_end)
        else:
            self.st.count(self.st.lists, path)
            if self.list_initial_state(params):  # issue 25
                self.list(path, res, ns, params)

    def get_one(self, res, ns, name):
        kind = res[0]
        with self.st.cond:
            obj = self.st.objects.get((kind, ns if res[4] else "", name))
        if obj is None:
            plural = [r for r, v in RESOURCES.items() if v[0] == kind][0]
            self.send_status(404, '%s "%s" not found' % (plural, name))
            return
        self.send_json(200, obj)

    def selectors(self, params, ns):
        fields = parse_selector(params.get("fieldSelector"))
        labels = parse_selector(params.get("labelSelector"))
        if ns is not None:
            fields.append(("metadata.namespace", "=", ns))
        return fields, labels

    def list(self, path, res, ns, params):
        kind, api_version, list_kind = res[0], res[1], res[2]
        st = self.st
        try:
            limit = int(params.get("limit") or 0)
            if limit < 0:
                raise ValueError
        except ValueError:
            self.send_status(400, "invalid limit")
            return
        fields, labels = self.selectors(params, ns)
        cont = params.get("continue")
        key = path + "?" + (params.get("fieldSelector") or "") + "&" + \
            (params.get("labelSelector") or "")
        with st.cond:
            if cont:
                try:
                    rv, offset = decode_continue(cont, key)
                except ValueError as e:
                    self.send_status(400, str(e))
                    return
                if rv < st.compact_rv:
                    expired = True
                else:
                    expired = False
                    objs = st.snapshot_at(kind, rv)
            else:
                expired = False
                rv, offset = st.rv, 0
                objs = st.snapshots.get((kind, rv))
                if objs is None:
                    objs = st.sorted_objects(kind)
                    st.remember_snapshot(kind, rv, objs)
        if expired:
            self.send_status(410, "The provided continue parameter is too old to display a "
                             "consistent list result. You can start a new list without the "
                             "continue parameter.", "Expired")
            return
        if fields or labels:
            objs = [o for o in objs if selector_match(o, fields, labels)]
        page = objs[offset:offset + limit] if limit else objs[offset:]
        md = {"resourceVersion": str(rv)}
        end = offset + len(page)
        if limit and end < len(objs):
            md["continue"] = encode_continue(key, rv, end)
            md["remainingItemCount"] = len(objs) - end
        with st.cond:
            items = b",".join([st.item_bytes(o) for o in page])
        head = dumps({"kind": list_kind, "apiVersion": api_version, "metadata": md})
        self.send_raw_json(200, b"%s,\"items\":[%s]}" % (head[:-1], items))

    # ---- watch ---------------------------------------------------------------------------------

    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def peer_gone(self):
        sock = self.request
        try:
            if sock.pending():
                return False
            r, _, _ = select.select([sock], [], [], 0)
            if not r:
                return False
            sock.setblocking(False)
            try:
                data = sock.recv(64)
            finally:
                sock.settimeout(IDLE_TIMEOUT)
            return data == b""
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return False
        except (OSError, ValueError):
            return True

    def watch(self, path, res, ns, params, initial_end=False):
        kind, api_version = res[0], res[1]
        rname = [r for r, v in RESOURCES.items() if v is res][0]
        st = self.st
        rv_param = params.get("resourceVersion", "")
        try:
            # 0 or absent: the server's own default, as the real one does.
            timeout = int(params.get("timeoutSeconds") or 0) or DEFAULT_WATCH_TIMEOUT
            start_rv = int(rv_param) if rv_param not in ("", "0") else None
            if timeout < 0 or (start_rv is not None and start_rv < 0):
                raise ValueError
        except ValueError:
            self.send_status(400, "invalid resourceVersion or timeoutSeconds")
            return
        bookmarks = params.get("allowWatchBookmarks", "").lower() in ("true", "1")
        fields, labels = self.selectors(params, ns)
        interval = self.server.bookmark_interval

        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.flush()

        me = Watcher(self.request)
        initial = []
        with st.cond:
            # sendInitialEvents (initial_end): the current state, whatever the rv (NotOlderThan).
            expired = start_rv is not None and start_rv < st.compact_rv and not initial_end
            if not expired:
                if start_rv is None or initial_end:  # synthetic ADDED for the current state
                    initial = st.sorted_objects(kind)
                    pos = len(st.history)
                    last_rv = st.rv
                else:
                    pos = bisect.bisect_right(st.history_rvs, start_rv)
                    last_rv = start_rv
                st.watchers.add(me)
        if expired:
            ev = {"type": "ERROR", "object": status_body(410, "too old resource version",
                                                         "Expired")}
            self.write_chunk(dumps(ev) + b"\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        log("watch %s from rv %s (timeout %ss)" % (path, rv_param or "<now>", timeout))
        try:
            self.write_initial(initial, fields, labels)
            if initial_end and st.fleet.take_initial_deleted():
                # A server that does not stream the state as KEP-3157 says (ADDED only).
                gone = initial[0] if initial else {
                    "kind": kind, "apiVersion": api_version,
                    "metadata": {"name": "fakeapi-gone", "namespace": "default",
                                 "resourceVersion": str(last_rv)}}
                self.write_chunk(dumps({"type": "DELETED", "object": gone}) + b"\n")
            if initial_end:
                self.write_chunk(initial_events_end(kind, api_version, last_rv))
            deadline = time.monotonic() + timeout
            next_bm = time.monotonic() + interval
            while True:
                events, action = [], None
                with st.cond:
                    while action is None:
                        now = time.monotonic()
                        if me.dropped:
                            action = "drop"
                        elif st.stopping or rname in st.no_crd:  # its CRD went: the end
                            action = "end"
                        elif st.pause_until > now:  # partitioned: nothing gets through
                            st.cond.wait(min(st.pause_until - now, POLL))
                            if time.monotonic() >= st.pause_until:
                                next_bm = time.monotonic() + interval
                            else:
                                action = "poll"
                        elif pos < len(st.history):
                            for erv, etype, ekind, obj, prev in st.history[pos:]:
                                ev = ekind == kind and selected_event(etype, obj, prev,
                                                                      fields, labels)
                                if ev:
                                    events.append(ev)
                            pos = len(st.history)
                            last_rv = st.rv
                            if events:
                                action = "events"
                        elif now >= deadline:
                            action = "end"
                        elif bookmarks and now >= next_bm:
                            last_rv = st.rv
                            next_bm = now + interval
                            action = "bookmark"
                        else:
                            wake = min(deadline, next_bm if bookmarks else deadline, now + POLL)
                            st.cond.wait(max(0.0, wake - now))
                            if time.monotonic() >= now + POLL - 0.01:
                                action = "poll"
                if action == "drop":
                    self.close_connection = True
                    return
                if action == "poll":
                    if self.peer_gone():
                        self.close_connection = True
                        return
                    continue
                if action == "end":
                    self.wfile.write(b"0\r\n\r\n")
                    return
                if action == "bookmark":
                    bm = {"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version,
                                                         "metadata": {
                                                             "resourceVersion": str(last_rv)}}}
                    self.write_chunk(dumps(bm) + b"\n")
                    with st.stats_lock:
                        st.bookmarks += 1
                    continue
                for etype, obj in events:
                    self.write_chunk(dumps({"type": etype, "object": obj}) + b"\n")
                with st.stats_lock:
                    st.watch_events += len(events)
        except OSError:
            self.close_connection = True
        finally:
            with st.cond:
                st.watchers.discard(me)
            if me.dropped:
                self.close_connection = True


class ControlHandler(BaseHandler):
    def do_GET(self):
        path = urlsplit(self.path).path
        if path == "/stats":
            self.send_json(200, self.server.state.stats())
        elif path == "/requests":
            self.send_json(200, {"requests": self.server.state.recent_requests()})
        elif path == "/objects":
            with self.server.state.cond:
                objs = [o for _, o in sorted(self.server.state.objects.items())]
            self.send_json(200, {"kind": "List", "apiVersion": "v1", "items": objs})
        else:
            self.send_json(404, {"ok": False, "error": "not found"})

    def do_POST(self):
        path = urlsplit(self.path).path
        try:
            body = self.read_body()
        except ValueError as e:
            self.close_connection = True
            self.send_json(400, {"ok": False, "error": str(e)})
            return
        if path != "/control":
            self.send_json(404, {"ok": False, "error": "not found"})
            return
        try:
            req = json.loads(body or b"null")
            rv = self.server.state.control(req)
        except (ValueError, ControlError) as e:
            self.send_json(400, {"ok": False, "error": str(e)})
            return
        log("control %s -> rv %d" % (req.get("op"), rv))
        self.send_json(200, {"ok": True, "resourceVersion": str(rv)})


def load_objects(state, path):
    with open(path, "rb") as f:
        doc = json.load(f)
    if isinstance(doc, dict) and (doc.get("kind") == "List" or "items" in doc):
        items = doc.get("items") or []
    elif isinstance(doc, list):
        items = doc
    else:
        items = [doc]
    n = 0
    for it in items:
        if isinstance(it, dict) and it.get("kind") in KINDS:
            state.apply(it)
            n += 1
        else:
            kind = it.get("kind") if isinstance(it, dict) else type(it).__name__
            sys.stderr.write("fakeapi: ignoring object of kind %r in %s\n" % (kind, path))
    return n


def main():
    global VERBOSE
    ap = argparse.ArgumentParser(description="fake Kubernetes API server for tests")
    ap.add_argument("--cert", required=True, help="server certificate (PEM)")
    ap.add_argument("--key", required=True, help="server private key (PEM)")
    ap.add_argument("--client-ca", help="accept client certificates signed by this CA as auth")
    ap.add_argument("--token", required=True, help="bearer token clients must send")
    ap.add_argument("--objects", help="kubectl List (JSON) of Namespace/Service/EndpointSlice/Pod")
    ap.add_argument("--host", default="127.0.0.1", help="API listen address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="API port (0: pick one)")
    ap.add_argument("--control-port", type=int, default=0, help="control port on 127.0.0.1")
    ap.add_argument("--bookmark-interval", type=float, default=1.0, help="seconds")
    ap.add_argument("--list-item-kinds", action="store_true",
                    help="keep kind/apiVersion in list items (the real server omits them)")
    ap.add_argument("--no-crd", action="append", default=[], choices=CRD_RESOURCES,
                    help="serve this CRD-backed resource as not installed (404); repeatable")
    ap.add_argument("--verbose", action="store_true", help="log requests to stderr")
    ap.add_argument("--refuse", default="",
                    help="comma-separated ways of getting the initial state to refuse: "
                         "stream, cache, consistent (issue 25; op refuse changes it)")
    ap.add_argument("--ignore-initial-events", action="store_true",
                    help="ignore sendInitialEvents and resourceVersionMatch on watches")
    ap.add_argument("--initial-rv", type=int, default=FIRST_RV,
                    help="resourceVersion of the empty store, also the compaction point: a "
                         "restarted server continues above what its clients saw, and their "
                         "older resourceVersions get 410, as after a real restart and compaction")
    args = ap.parse_args()
    VERBOSE = args.verbose
    if args.bookmark_interval <= 0:
        ap.error("--bookmark-interval must be > 0")

    state = State(args.token)
    state.rv = state.compact_rv = args.initial_rv
    state.list_item_kinds = args.list_item_kinds
    refuse = set(filter(None, args.refuse.split(",")))
    if refuse - set(WAYS):
        ap.error("--refuse takes %s" % ", ".join(WAYS))
    state.fleet.refuse = refuse
    state.fleet.ignore_initial_events = args.ignore_initial_events
    state.no_crd = set(args.no_crd)
    if args.objects:
        try:
            load_objects(state, args.objects)
        except (OSError, ValueError, ControlError) as e:
            sys.stderr.write("fakeapi: %s: %s\n" % (args.objects, e))
            return 2
        # The sorted state each first list page starts from, ready before anyone asks: at
        # 100,000 Services sorting it took longer than serving a page.
        with state.cond:
            for kind in KINDS:
                state.remember_snapshot(kind, state.rv, state.sorted_objects(kind))

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["http/1.1"])
    try:
        ctx.load_cert_chain(args.cert, args.key)
        if args.client_ca:
            ctx.load_verify_locations(cafile=args.client_ca)
            ctx.verify_mode = ssl.CERT_OPTIONAL
    except (OSError, ssl.SSLError) as e:
        sys.stderr.write("fakeapi: TLS setup: %s\n" % e)
        return 2

    try:
        api = make_server_class(args.host)((args.host, args.port), ApiHandler)
        ctl = make_server_class("127.0.0.1")(("127.0.0.1", args.control_port), ControlHandler)
    except OSError as e:
        sys.stderr.write("fakeapi: listen: %s\n" % e)
        return 2
    api.state = ctl.state = state
    api.sslctx = ctx
    api.client_ca = bool(args.client_ca)
    api.bookmark_interval = args.bookmark_interval
    api.list_item_kinds = args.list_item_kinds

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2},
                                daemon=True) for s in (api, ctl)]
    for t in threads:
        t.start()
    sys.stdout.write("fakeapi listening api=%d control=%d\n" % (api.server_address[1],
                                                                 ctl.server_address[1]))
    sys.stdout.flush()

    while not stop.wait(0.5):
        pass
    # End open watch streams cleanly, then stop accepting.
    with state.cond:
        state.stopping = True
        state.cond.notify_all()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        with state.cond:
            if not state.watchers:
                break
        time.sleep(0.05)
    for s in (api, ctl):
        s.shutdown()
        s.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
