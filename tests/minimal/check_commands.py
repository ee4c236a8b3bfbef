#!/usr/bin/env python3
"""Every external command the README's two commands run is installed by them.

Reads the shell scripts that deploy/demo.sh and tests/run.sh run (and, at the bench level, the
benchmarks), finds the words in command position (after ;, |, &&, ||, (, $(, `, newline, the
shell's keywords, and wrappers such as ip netns exec, timeout, taskset, env, setpriv, unshare,
chroot, bash -c), leaves out the shell's builtins and keywords, the scripts' own functions and
paths into the repository, and looks each one up in COMMANDS below. A command must come from a
package of a minimal Debian 12 root (MINBASE: debootstrap --variant=minbase plus git and
ca-certificates) or from deploy/deps.sh's list for the script's level. Where the command is
installed on this machine, dpkg -S must agree with the table.

Fails on: a command not in the table (say which package provides it), a package neither in the
minimal root nor in deps.sh's level, a table entry dpkg contradicts. Heredoc bodies and
single-quoted strings (awk, Python) are not read as shell.
Usage: tests/minimal/check_commands.py [--self-test] [--list]
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Scripts per level: what tests/run.sh and deploy/demo.sh run; the benchmarks at "bench".
LEVELS = {
    "test": ["deploy/demo.sh", "deploy/deps.sh", "tests/run.sh", "tests/format.sh", ".ci/run",
             "tests/integration/*.sh", "tests/deploy/*.sh", "tests/fakeapi/*.sh",
             "tests/minimal/*.sh", "deploy/image.sh", "deploy/podman-probe.sh",
             "deploy/node-setup.sh"],
    "bench": ["tests/bench/*.sh"],
}

# The programs' packages of debootstrap --variant=minbase --include=git,ca-certificates bookworm
# (its .debs, libraries left out), as tests/minimal/run_minimal.sh makes it.
MINBASE = {
    "adduser", "apt", "base-files", "base-passwd", "bash", "bsdutils", "ca-certificates",
    "coreutils", "dash", "debconf", "debian-archive-keyring", "debianutils", "diffutils", "dpkg",
    "e2fsprogs", "findutils", "git", "gpgv", "grep", "gzip", "hostname", "init-system-helpers",
    "libc-bin",
    "login", "logsave", "mawk", "mount", "ncurses-base", "ncurses-bin", "openssl", "passwd",
    "perl", "perl-base", "sed", "sysvinit-utils", "tar", "tzdata", "util-linux",
    "util-linux-extra",
}

# command -> the Debian 12 package that provides it ("PKG>OWNER": installed as PKG, the file
# belongs to OWNER, a dependency of PKG).
COMMANDS = {
    # minimal root
    "awk": "mawk", "basename": "coreutils", "bash": "bash", "cat": "coreutils",
    "chmod": "coreutils", "chroot": "coreutils", "cmp": "diffutils", "cp": "coreutils",
    "cut": "coreutils", "date": "coreutils", "diff": "diffutils", "dirname": "coreutils",
    "dpkg": "dpkg", "dpkg-query": "dpkg", "env": "coreutils", "find": "findutils",
    "findmnt": "util-linux", "getconf": "libc-bin", "git": "git", "grep": "grep",
    "head": "coreutils", "id": "coreutils", "ln": "coreutils", "ls": "coreutils",
    "mkdir": "coreutils", "mktemp": "coreutils", "mount": "mount", "mountpoint": "util-linux",
    "mv": "coreutils", "nproc": "coreutils", "paste": "coreutils", "readlink": "coreutils",
    "rm": "coreutils", "rmdir": "coreutils", "sed": "sed", "seq": "coreutils", "setpriv": "util-linux",
    "sh": "dash", "sleep": "coreutils", "sort": "coreutils", "stat": "coreutils",
    "tail": "coreutils", "tee": "coreutils", "timeout": "coreutils", "touch": "coreutils",
    "tr": "coreutils", "umount": "mount", "uniq": "coreutils", "unshare": "util-linux",
    "wc": "coreutils", "xargs": "findutils", "apt-get": "apt", "apt-cache": "apt",
    "deb-systemd-helper": "init-system-helpers", "openssl": "openssl", "taskset": "util-linux",
    "true": "coreutils", "false": "coreutils", "uname": "coreutils", "nice": "coreutils",
    "flock": "util-linux", "renice": "bsdutils", "od": "coreutils", "du": "coreutils", "df": "coreutils",
    "sha256sum": "coreutils", "md5sum": "coreutils", "tac": "coreutils", "yes": "coreutils",
    "expr": "coreutils", "printenv": "coreutils", "whoami": "coreutils", "install": "coreutils",
    "gzip": "gzip", "tar": "tar", "hostname": "hostname", "chown": "coreutils",
    "realpath": "coreutils", "numfmt": "coreutils", "fold": "coreutils", "shuf": "coreutils",
    # deploy/deps.sh: build
    "meson": "meson", "ninja": "ninja-build", "pkg-config": "pkg-config", "gcc": "gcc",
    "cc": "gcc", "python3": "python3>python3-minimal", "clang": "clang", "bpftool": "bpftool",
    # deploy/deps.sh: test
    "clang-format": "clang-format", "ip": "iproute2", "tc": "iproute2", "ss": "iproute2",
    "iptables-nft": "iptables", "iptables-legacy": "iptables", "ip6tables-nft": "iptables",
    "ip6tables-legacy": "iptables", "nft": "nftables",
    "unbound": "unbound", "unbound-checkconf": "unbound", "dig": "bind9-dnsutils",
    "kdig": "knot-dnsutils", "kxdpgun": "knot-dnsutils", "curl": "curl",
    "setcap": "libcap2-bin", "lscpu": "util-linux", "nsenter": "util-linux", "free": "procps", "getcap": "libcap2-bin", "capsh": "libcap2-bin",
    # The commands that stop processes by name are left out on purpose: scripts stop what they
    # started, by PID, and a script that called one fails this check (not in the table).
    "pgrep": "procps", "ps": "procps", "sysctl": "procps",
    "debootstrap": "debootstrap",
    # deploy/deps.sh: test, for tests/integration/test_dpdk.sh (and compare.sh's ndcache-dpdk)
    "ethtool": "ethtool", "iptables": "iptables", "ip6tables": "iptables",
    "arptables": "iptables", "ping": "iputils-ping",
    # deploy/deps.sh: test, for tests/integration/test_dnstap_writer.sh (Debian's dnstap reader)
    "fstrm_capture": "fstrm-bin", "fstrm_dump": "fstrm-bin", "dnstap-ldns": "dnstap-ldns",
    # deploy/deps.sh: bench (dnsperf: test too, for tests/integration/test_dnstap.sh)
    "dnsperf": "dnsperf", "knotd": "knot", "knotc": "knot", "kresd": "knot-resolver",
    "gnuplot": "gnuplot-nox", "iperf3": "iperf3",
    "dnsdist": "dnsdist", "pdns_recursor": "pdns-recursor", "rec_control": "pdns-recursor",
    # minbase
    "mkfifo": "coreutils", "ldd": "libc-bin", "dpkg-deb": "dpkg", "apt-config": "apt",
    # installed by the script that uses them, before it does (SELF_INSTALLED)
    "podman": "podman", "kubectl": "kubernetes-client", "kustomize": "kubernetes-client",
    "promtool": "prometheus", "runc": "runc",
}
# Packages a script installs (or unpacks) itself right before it uses them: deploy/image.sh and
# test_image.sh podman, test_kustomize.sh kubernetes-client (or a kustomize already there),
# test_monitoring.sh unpacks prometheus's promtool without installing it (no service starts).
SELF_INSTALLED = {"podman", "runc", "kubernetes-client", "prometheus"}
# Programs the scripts build or copy and then run by name (not packages).
OURS = {"ndcache"}

# Commands that take another command after their own arguments, and how many of the words that
# follow are theirs: "opts" skips words starting with '-' (and '$'), a number skips that many.
WRAPPERS = {
    "in_node": [], "in_pod": [], "exec": ["opts"], "command": ["opts"], "nohup": [],
    "builtin": [], "time": ["opts"], "sudo": ["opts"], "nice": ["opts"],
    "timeout": ["timeout"], "taskset": ["taskset"], "env": ["env"], "setpriv": ["opts"],
    "unshare": ["unshare"], "xargs": ["opts"], "chroot": ["opts", 1],
}
KEYWORDS_THEN_CMD = {"then", "do", "else", "elif", "if", "while", "until", "!", "{", "time"}


def shell_builtins():
    out = subprocess.run(["bash", "-c", "compgen -b; compgen -k"], capture_output=True,
                         text=True, check=True).stdout.split()
    return set(out) | {"[", "[[", "]]", "]"}


class Scanner:
    """Finds command words in bash source (a pragmatic subset of the grammar, see the docstring)."""

    OPS = ["&&", "||", ";;", ";&", "|&", "<<<", "<<-", "<<", ">>", ">&", "<&", "&>", ">|",
           "|", "&", ";", "(", ")", "<", ">"]

    def __init__(self, text, path):
        self.s = text
        self.i = 0
        self.path = path
        self.found = []  # (word, line)
        self.functions = set()

    def line(self, i=None):
        return self.s.count("\n", 0, self.i if i is None else i) + 1

    # -- words: returns (literal_text_or_None, start) after reading one shell word
    def read_word(self):
        start = self.i
        lit = []
        plain = True
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\n" or c in ";&|()<>":
                break
            if c == "\\":
                if self.i + 1 < len(s) and s[self.i + 1] == "\n":
                    self.i += 2
                    continue
                lit.append(s[self.i + 1:self.i + 2])
                self.i += 2
                continue
            if c == "'":
                j = s.find("'", self.i + 1)
                j = len(s) if j < 0 else j
                lit.append(s[self.i + 1:j])
                self.i = j + 1
                continue
            if c == '"':
                self.i += 1
                inner_start = self.i
                self.double_quoted()
                inner = s[inner_start:self.i - 1]
                if "$" in inner or "`" in inner:
                    plain = False
                lit.append(inner)
                continue
            if c == "`":
                self.i += 1
                self.code(until="`")
                plain = False
                continue
            if c == "$":
                plain = False
                if s.startswith("$((", self.i):
                    self.skip_balanced("$((", "))")
                elif s.startswith("$(", self.i):
                    self.i += 2
                    self.code(until=")")
                elif s.startswith("${", self.i):
                    self.skip_braces()
                else:
                    self.i += 1
                    while self.i < len(s) and (s[self.i].isalnum() or s[self.i] in "_@*#?$!-"):
                        self.i += 1
                        if s[self.i - 1] in "@*#?$!-":
                            break
                continue
            lit.append(c)
            self.i += 1
        return ("".join(lit) if plain else None), start, s[start:self.i]

    def double_quoted(self):
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                self.i += 2
            elif c == '"':
                self.i += 1
                return
            elif s.startswith("$((", self.i):
                self.skip_balanced("$((", "))")
            elif s.startswith("$(", self.i):
                self.i += 2
                self.code(until=")")
            elif s.startswith("${", self.i):
                self.skip_braces()
            elif c == "`":
                self.i += 1
                self.code(until="`")
            else:
                self.i += 1

    def skip_braces(self):
        depth = 0
        s = self.s
        while self.i < len(s):
            if s.startswith("${", self.i):
                depth += 1
                self.i += 2
                continue
            c = s[self.i]
            if c == "\\":
                self.i += 2
                continue
            if c == "'" and depth:
                # quotes inside ${...} (patterns): skip them whole
                j = s.find("'", self.i + 1)
                self.i = len(s) if j < 0 else j + 1
                continue
            if c == '"':
                self.i += 1
                self.double_quoted()
                continue
            if s.startswith("$(", self.i) and not s.startswith("$((", self.i):
                self.i += 2
                self.code(until=")")
                continue
            self.i += 1
            if c == "}":
                depth -= 1
                if depth == 0:
                    return

    def skip_balanced(self, open_, close):
        self.i += len(open_)
        depth = 1
        s = self.s
        while self.i < len(s) and depth:
            if s.startswith("$(", self.i) and not s.startswith("$((", self.i):
                self.i += 2
                self.code(until=")")
                continue
            if s[self.i] == "(":
                depth += 1
            elif s[self.i] == ")":
                depth -= 1
                if depth == 0 and s.startswith(close, self.i):
                    self.i += len(close)
                    return
            self.i += 1

    def record(self, word, pos):
        if word is None or not word:
            return
        if word.startswith("/"):
            word = os.path.basename(word)
        elif "/" in word:
            return  # a path into the repository or the work directory
        if re.fullmatch(r"[A-Za-z0-9_.+\[\]!{}-]+", word):
            self.found.append((word, self.line(pos)))

    # -- code: reads commands until `until` (")" or "`") or the end
    def code(self, until=None):
        s = self.s
        expect = True  # a command word comes next
        wrapper = None  # (name, remaining arg rules)
        pending_heredocs = []
        case_depth = []  # per open case: True while reading patterns
        in_dbl = False
        args_mode = False  # for/select lists: no command until a separator
        skip_next = 0
        prev_word = None
        prev_raw = ""
        want_c_string = False
        depth = 0  # ( ) groups inside this code context
        while self.i < len(s):
            c = s[self.i]
            if c == "\n":
                self.i += 1
                for delim, strip in pending_heredocs:
                    self.skip_heredoc(delim, strip)
                pending_heredocs = []
                if not in_dbl:
                    expect, wrapper, args_mode, skip_next = True, None, False, 0
                continue
            if c in " \t":
                self.i += 1
                continue
            if c == "\\" and s.startswith("\\\n", self.i):
                self.i += 2
                continue
            if c == "#" and (self.i == 0 or s[self.i - 1] in " \t\n;(|&"):
                j = s.find("\n", self.i)
                self.i = len(s) if j < 0 else j
                continue
            if until and s.startswith(until, self.i) and depth == 0 and \
                    not (until == ")" and case_depth and case_depth[-1]):
                self.i += len(until)
                return
            op = next((o for o in self.OPS if s.startswith(o, self.i)), None)
            if op:
                self.i += len(op)
                if op in ("<<", "<<-"):
                    while self.i < len(s) and s[self.i] in " \t":
                        self.i += 1
                    w, _, raw = self.read_word()
                    delim = re.sub(r"[\"'\\]", "", raw)
                    pending_heredocs.append((delim, op == "<<-"))
                    continue
                if op in ("<", ">", ">>", "<<<", ">&", "<&", "&>", ">|"):
                    if s.startswith("(", self.i) and op in ("<", ">"):
                        self.i += 1  # process substitution
                        self.code(until=")")
                        continue
                    skip_next = max(skip_next, 1)
                    continue
                if op == ")":
                    if case_depth and case_depth[-1]:
                        case_depth[-1] = False  # end of a pattern: a command list follows
                        expect = True
                        continue
                    depth -= 1
                    expect = False
                    continue
                if op in (";;", ";&"):
                    if case_depth:
                        case_depth[-1] = True
                    expect = True
                    continue
                if op == "(":
                    if prev_raw.endswith("=") and re.match(r"[A-Za-z_]\w*(\[[^]]*\])?\+?=$",
                                                           prev_raw):
                        self.i -= 1
                        self.skip_balanced("(", ")")  # an array literal: words, not commands
                        prev_raw = ""
                        continue
                    if prev_word is not None and s.startswith(")", self.i):
                        self.i += 1  # name(): a function definition; its body follows
                        expect = True
                        continue
                    if expect and s.startswith("(", self.i):
                        self.skip_balanced("(", "))")  # (( arithmetic ))
                        expect = False
                        continue
                    depth += 1
                if in_dbl and op in ("&&", "||", "(", ")"):
                    continue
                expect, wrapper, args_mode, skip_next = True, None, False, 0
                prev_word = None
                prev_raw = ""
                continue
            # a word
            if s[self.i].isdigit() and re.match(r"\d+[<>]", s[self.i:]):
                self.i += 1  # 2>/dev/null and friends: the operator comes next
                continue
            word, pos, raw = self.read_word()
            if not raw:
                self.i += 1
                continue
            prev_word = word
            prev_raw = raw
            if want_c_string:
                want_c_string = False
                if raw[:1] in "\"'":
                    inner = raw[1:-1]
                    if raw[0] == '"':
                        inner = inner.replace('\\"', '"').replace("\\$", "$").replace("\\\\", "\\")
                    sub = Scanner(inner, self.path)
                    sub.code()
                    base = self.line(pos) - 1
                    self.found += [(w, base + ln) for w, ln in sub.found]
                continue
            if skip_next:
                skip_next -= 1
                continue
            if word == "esac" and case_depth and expect:
                case_depth.pop()
                expect = False
                continue
            if case_depth and case_depth[-1] and expect:
                continue  # a case pattern
            if in_dbl:
                if word == "]]":
                    in_dbl = False
                    expect = False
                continue
            if args_mode:
                if word in ("do",):
                    args_mode, expect = False, True
                continue
            if wrapper:
                name, rules = wrapper
                if rules:
                    rule = rules[0]
                    if rule == "opts":
                        if raw.startswith("-") or raw.startswith("$") or raw.startswith('"$'):
                            continue
                        rules = rules[1:]
                    elif isinstance(rule, int):
                        wrapper = (name, ([rule - 1] if rule > 1 else []) + rules[1:])
                        continue
                    elif rule == "timeout":
                        if raw in ("-k", "-s", "--kill-after", "--signal"):
                            skip_next = 1
                            continue
                        if raw.startswith("-"):
                            continue
                        wrapper = (name, [])
                        continue  # the duration
                    elif rule == "taskset":
                        if raw in ("-c", "--cpu-list"):
                            skip_next = 1
                            continue
                        if raw.startswith("-"):
                            continue
                        rules = rules[1:]
                    elif rule == "env":
                        if raw in ("-u", "--unset"):
                            skip_next = 1
                            continue
                        if raw.startswith("-") or re.match(r"[A-Za-z_][A-Za-z0-9_]*=", raw) or \
                                raw.startswith("${"):
                            continue
                        rules = rules[1:]
                    elif rule == "unshare":
                        if raw in ("--propagation",):
                            skip_next = 1
                            continue
                        if raw.startswith("-"):
                            continue
                        rules = rules[1:]
                wrapper = None
                expect = True
                # falls through: this word is the wrapped command
            if not expect:
                if prev_cmd_is_shell(self, word):
                    want_c_string = True
                continue
            if re.match(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", raw):
                continue  # an assignment before the command
            if word in KEYWORDS_THEN_CMD:
                continue
            if word in ("for", "select"):
                rest = s[self.i:].lstrip(" \t")
                if rest.startswith("(("):
                    self.i = len(s) - len(rest)
                    self.skip_balanced("((", "))")  # for ((...)): arithmetic
                else:
                    args_mode = True
                expect = False
                continue
            if word == "case":
                case_depth.append(True)  # patterns, once "WORD in" is read
                args_mode = True
                expect = False
                continue
            if word == "function":
                skip_next = 1
                continue
            if word == "[[":
                in_dbl = True
                continue
            if word in ("fi", "done", "}"):
                expect = False
                continue
            self.record(word, pos)
            self.last_cmd = word
            expect = False
            if word == "ip":
                # ip netns exec NS CMD: the command after the namespace
                m = re.match(r"\s+netns\s+exec\s+\S+\s+", s[self.i:])
                if m:
                    self.i += m.end()
                    expect = True
                continue
            if word in WRAPPERS:
                wrapper = (word, list(WRAPPERS[word]))
                if not wrapper[1]:
                    wrapper = None
                    expect = True
                continue
        return

    def skip_heredoc(self, delim, strip):
        s = self.s
        while self.i < len(s):
            j = s.find("\n", self.i)
            line = s[self.i:] if j < 0 else s[self.i:j]
            self.i = len(s) if j < 0 else j + 1
            if (line.lstrip("\t") if strip else line) == delim:
                return


def prev_cmd_is_shell(sc, word):
    """After 'bash' or 'sh' (as the command), '-c' makes the next word a script."""
    return word == "-c" and getattr(sc, "last_cmd", None) in ("bash", "sh")


def scan(path, text=None):
    text = open(path).read() if text is None else text
    sc = Scanner(text, path)
    sc.code()
    funcs = set(re.findall(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\)", text, re.M))
    return sc.found, funcs


def deps_list(level):
    out = subprocess.run([os.path.join(ROOT, "deploy/deps.sh"), "--list", level],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def dpkg_owner(cmd):
    """The package that owns cmd on this machine, or None where it is not installed."""
    p = subprocess.run(["bash", "-c", 'type -P -- "$1"', "_", cmd], capture_output=True,
                       text=True).stdout.strip()
    if not p.startswith("/"):
        return None
    if not p.startswith(("/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/")):
        # a local install (/usr/local, a pyenv shim) shadows it: look where Debian puts it
        p = next((d + cmd for d in ("/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/")
                  if os.path.exists(d + cmd)), None)
        if p is None:
            return None
    cands = [p, os.path.realpath(p)]
    for c in list(cands):
        # merged /usr: dpkg may know the file under /bin or /usr/bin
        if c.startswith("/usr/"):
            cands.append(c[4:])
        else:
            cands.append("/usr" + c)
    for c in cands:
        r = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True)
        if r.returncode == 0:
            owners = set()
            for line in r.stdout.splitlines():
                if ": " in line and not line.startswith("diversion"):
                    owners |= {o.split(":")[0].strip() for o in line.split(": ")[0].split(",")}
            if owners:
                return owners
    return set()


def check(files_by_level, verbose=False):
    errors = []
    builtins = shell_builtins()
    allowed = {"test": MINBASE | deps_list("test") | SELF_INSTALLED,
               "bench": MINBASE | deps_list("bench") | SELF_INSTALLED}
    seen = {}
    functions = set()
    scanned = {}
    for level, files in files_by_level.items():
        for f in files:
            found, funcs = scan(f)
            scanned[f] = (level, found)
            functions |= funcs
    for f, (level, found) in scanned.items():
        rel = os.path.relpath(f, ROOT)
        for cmd, line in found:
            if cmd in builtins or cmd in functions or cmd in OURS:
                continue
            pkg = COMMANDS.get(cmd, "").split(">")[0] or None
            if pkg is None:
                errors.append(f"{rel}:{line}: '{cmd}' is not in COMMANDS: which Debian package "
                              "provides it? (add it to the table and, unless the minimal root "
                              "has it, to deploy/deps.sh)")
                continue
            if pkg not in allowed[level]:
                errors.append(f"{rel}:{line}: '{cmd}' comes from {pkg}, which neither the "
                              f"minimal root nor deploy/deps.sh {level} installs")
                continue
            seen.setdefault(cmd, set()).add(level)
    checked = 0
    for cmd in sorted(seen):
        # what a script installs itself may come from another package where it was already there
        owners = None if COMMANDS[cmd].split(">")[0] in SELF_INSTALLED else dpkg_owner(cmd)
        if owners is None:
            continue
        checked += 1
        owner = COMMANDS[cmd].split(">")[-1]
        if owner not in owners:
            errors.append(f"COMMANDS says '{cmd}' comes from {owner}, dpkg -S says "
                          f"{', '.join(sorted(owners)) or 'no package'}")
    if verbose:
        for cmd in sorted(seen):
            print(f"  {cmd:20} {COMMANDS[cmd]:16} {'/'.join(sorted(seen[cmd]))}")
    return errors, len(scanned), len(seen), checked


def files_for(levels):
    out = {}
    for level, pats in levels.items():
        fs = []
        for p in pats:
            fs += sorted(glob.glob(os.path.join(ROOT, p)))
        out[level] = fs
    return out


def self_test():
    """The scanner finds what it must, and the check fails on a missing package."""
    import tempfile
    src = r'''#!/usr/bin/env bash
set -u
x=$(pgrep -f foo | head -1)
if ! mountpoint -q /sys; then ip netns exec ns1 dig +short a; fi
timeout -k 5 10 kdig @1.2.3.4 x
echo "$(seq 3)" >/dev/null 2>&1
python3 - <<'EOF'
import notacommand
EOF
awk '{ frobnicate($1) }' /dev/null
f() { cat; }
case "$1" in
build) tee ;;
*) ;;
esac
bash -c "setcap cap=ep x; exec setpriv --reuid=1 curl"
in_node ss -ltn
for p in a b; do stat "$p"; done
'''
    found, funcs = scan("self-test.sh", src)
    got = [w for w, _ in found]
    want = ["pgrep", "head", "mountpoint", "ip", "dig", "timeout", "kdig", "echo", "seq",
            "python3", "awk", "cat", "tee", "bash", "setcap", "exec", "setpriv", "curl",
            "in_node", "ss", "stat"]
    bad = []
    for w in want:
        if w not in got:
            bad.append(f"scanner missed '{w}'")
    for w in ("notacommand", "frobnicate", "build", "a", "b", "EOF", "import"):
        if w in got:
            bad.append(f"scanner took '{w}' for a command")
    if "f" not in funcs:
        bad.append("scanner missed the function f")
    # A script that calls a command from a package deps.sh does not install must fail.
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.sh")
        open(p, "w").write("#!/bin/bash\nkresd --version\nnot-a-real-command-xyz\n")
        errors, *_ = check({"test": [p]})
        if not any("'kresd' comes from knot-resolver" in e for e in errors):
            bad.append("a bench-only package used at the test level was not reported")
        if not any("'not-a-real-command-xyz' is not in COMMANDS" in e for e in errors):
            bad.append("an unknown command was not reported")
    return bad


def main():
    if "--self-test" in sys.argv:
        bad = self_test()
        for b in bad:
            print("FAIL - " + b)
        print(f"check_commands self-test: {0 if bad else 1} passed, {1 if bad else 0} failed")
        return 1 if bad else 0
    errors, nfiles, ncmds, checked = check(files_for(LEVELS), verbose="--list" in sys.argv)
    for e in errors:
        print("FAIL - " + e)
    if not errors:
        print(f"ok   - {ncmds} commands in {nfiles} scripts: each from the minimal root or "
              f"deploy/deps.sh at its level ({checked} cross-checked with dpkg -S)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
