#!/usr/bin/env python3
"""Checks that every metric the Grafana dashboard and the Prometheus rules use is one the agent
exports, so that the two cannot drift apart.

Usage: check_monitoring.py --metrics FILE [--dashboard JSON] [--rules YAML] [--list]
FILE is a /metrics response of a running agent (Prometheus text format 0.0.4).

- Metric names come from every PromQL expression: the dashboard's panel targets and template
  queries (label_values(metric, label)), the rules' `expr`. Function names, keywords, label
  names (in {...} and in by/without/on/ignoring/group_left/group_right lists), strings, ranges
  and Grafana variables are not metric names.
- A name is known if the exposition has a sample of that name. For a histogram family F the
  samples are F_bucket, F_sum and F_count; F alone is not a series and is reported.
- For `metric{label="value"}` on an exported metric that has that label, some exported sample
  must carry that value (a misspelt label value selects nothing, silently).
- EXTERNAL lists the few metrics that come from elsewhere (named with their source); they are
  printed, not checked.
"""
import argparse
import json
import re
import sys

import yaml

EXTERNAL = {
    "container_memory_working_set_bytes": "cAdvisor (kubelet /metrics/cadvisor)",
    "container_spec_memory_limit_bytes": "cAdvisor (kubelet /metrics/cadvisor)",
}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan", "atan2", "start", "end"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def parse_exposition(text):
    """({sample name: [label dicts]}, {family: type})"""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(None, 3)
            types[name] = typ.strip()
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s', line)
        if not m:
            raise ValueError(f"exposition: cannot parse {line!r}")
        labels = dict(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        samples.setdefault(m.group(1), []).append(labels)
    return samples, types


def expressions(dashboard, rules):
    """[(where, PromQL)] of both files."""
    out = []

    def walk(node, where):
        if isinstance(node, dict):
            title = node.get("title", where)
            for k, v in node.items():
                if k == "expr" and isinstance(v, str):
                    out.append((f"dashboard: {title}", v))
                elif k == "query" and isinstance(v, str) and "label_values" in v:
                    out.append((f"dashboard: variable {node.get('name')}", v))
                elif k == "query" and isinstance(v, dict) and "label_values" in v.get("query", ""):
                    out.append((f"dashboard: variable {node.get('name')}", v["query"]))
                else:
                    walk(v, title)
        elif isinstance(node, list):
            for x in node:
                walk(x, where)

    if dashboard is not None:
        walk(dashboard, "dashboard")
    if rules is not None:
        spec = rules.get("spec", rules)
        for g in spec.get("groups") or []:
            for r in g.get("rules") or []:
                out.append((f"rules: {r.get('alert') or r.get('record')}", r["expr"]))
    return out


def selectors(expr):
    """[(metric name, {label: value} of = matchers)] used in one PromQL expression."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'',
               lambda m: '"' + m.group(0)[1:-1].replace("{", "(").replace("}", ")") + '"', expr)
    e = re.sub(r"\$\{?\w+\}?", "VAR", e)  # Grafana variables
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges and subqueries
    # label_values(metric, label): the second argument is a label.
    e = re.sub(r"label_values\(\s*([^,()]+?)\s*,\s*\w+\s*\)", r"(\1)", e)
    found = []
    matchers = {}

    def take_braces(m):
        key = f" @SEL{len(matchers)}@ "
        matchers[key] = dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', m.group(1)))
        # only `=`: drop =~, != and !~ matches that the findall above took as `=`
        for neg in re.findall(r'(\w+)\s*(?:=~|!=|!~)', m.group(1)):
            matchers[key].pop(neg, None)
        return key

    e = re.sub(r"\{([^}]*)\}", take_braces, e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r" ", e)
    e = re.sub(r'"[^"]*"', " ", e)
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*@SEL\d+@)?(\s*\()?", e):
        name, sel, call = m.group(1), m.group(2), m.group(3)
        if call or name.lower() in KEYWORDS or re.fullmatch(r"SEL\d+|VAR", name):
            continue
        if re.fullmatch(r"\d.*|e\d+", name):
            continue
        found.append((name, matchers.get(f" {sel.strip()} ", {}) if sel else {}))
    # A selector with only braces, {__name__="x"}:
    for key, ms in matchers.items():
        if "__name__" in ms:
            found.append((ms.pop("__name__"), ms))
    return found


def check(exposition_text, dashboard, rules, show=False):
    samples, types = parse_exposition(exposition_text)
    errors, used = [], {}
    for where, expr in expressions(dashboard, rules):
        names = selectors(expr)
        if not names:
            errors.append(f"{where}: no metric found in {expr!r}")
        for name, ms in names:
            used.setdefault(name, set()).add(where)
            if name in EXTERNAL:
                continue
            if name in types and types[name] == "histogram":
                errors.append(f"{where}: {name} is a histogram: use {name}_bucket, _sum or _count")
                continue
            if name not in samples:
                hint = ""
                base = next((name[: -len(s)] for s in HISTOGRAM_SUFFIXES if name.endswith(s)), None)
                if base and base in types:
                    hint = f" ({base} is a {types[base]}, not a histogram)"
                errors.append(f"{where}: {name} is not exported by the agent{hint}")
                continue
            for label, value in ms.items():
                have = {s.get(label) for s in samples[name]}
                if None in have and len(have) == 1:
                    continue  # a label Prometheus adds (instance, job, pod...)
                if value not in have:
                    errors.append(f"{where}: {name}{{{label}=\"{value}\"}} selects nothing: the "
                                  f"agent exports {label} in {sorted(v for v in have if v)}")
    if show:
        for name in sorted(used):
            src = EXTERNAL.get(name, "agent")
            print(f"  {name:48s} {src}: {', '.join(sorted(used[name]))}")
    return errors, used


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", required=True, help="a /metrics response of a running agent")
    ap.add_argument("--dashboard", help="Grafana dashboard JSON")
    ap.add_argument("--rules", help="PrometheusRule (or rule file) YAML")
    ap.add_argument("--list", action="store_true", help="print every metric used and where")
    a = ap.parse_args()
    text = open(a.metrics, encoding="utf-8").read()
    dashboard = json.load(open(a.dashboard, encoding="utf-8")) if a.dashboard else None
    rules = yaml.safe_load(open(a.rules, encoding="utf-8")) if a.rules else None
    errors, used = check(text, dashboard, rules, a.list)
    for e in errors:
        print(f"check_monitoring: {e}")
    ext = sorted(n for n in used if n in EXTERNAL)
    print(f"check_monitoring: {len(used)} metric names used, {len(used) - len(ext)} checked "
          f"against the agent, {len(ext)} external ({', '.join(ext) or 'none'}): "
          f"{'ok' if not errors else f'{len(errors)} problem(s)'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
