#!/usr/bin/env python3
"""Strict reader of a Chrome trace (Trace Event Format, JSON object form) as vramlab writes it.

Checks the rules Perfetto's JSON importer and chrome://tracing rely on and prints, on success, one
JSON summary per line: {"pid", "process", "counters": {name: {"count", "max": {series: value}}},
"slices": [[name, ts, dur, args]...], "instants": [[name, ts, scope, args]...]}. Exits 1 naming the
first violation otherwise.

Usage: check_trace.py TRACE.json
"""
import json
import math
import sys

PHASES = {"X", "B", "E", "C", "i", "I", "M"}
METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


def fail(message):
    print("trace: " + message, file=sys.stderr)
    sys.exit(1)


def number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def main(path):
    with open(path, encoding="utf-8") as f:
        try:
            trace = json.load(f, parse_constant=lambda c: fail("non-JSON constant " + c))
        except json.JSONDecodeError as e:
            fail("not JSON: %s" % e)
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        fail("no traceEvents array at the top level")
    if trace.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        fail("displayTimeUnit must be ms or ns")
    processes = {}
    threads = {}
    stacks = {}
    for index, event in enumerate(trace["traceEvents"]):
        where = "event %d" % index
        if not isinstance(event, dict):
            fail(where + " is not an object")
        ph = event.get("ph")
        if ph not in PHASES:
            fail("%s: phase %r is not one of %s" % (where, ph, sorted(PHASES)))
        if not isinstance(event.get("name"), str) or not event["name"]:
            fail(where + ": no name")
        for key in ("pid", "tid"):
            if not isinstance(event.get(key), int) or isinstance(event.get(key), bool):
                fail("%s: %s is not an integer" % (where, key))
        args = event.get("args", {})
        if not isinstance(args, dict):
            fail(where + ": args is not an object")
        pid = event["pid"]
        process = processes.setdefault(pid, {"pid": pid, "process": None, "counters": {},
                                             "slices": [], "instants": []})
        if ph == "M":
            if event["name"] not in METADATA:
                fail("%s: unknown metadata %r" % (where, event["name"]))
            if event["name"] == "process_name":
                process["process"] = args.get("name")
            if event["name"] == "thread_name":
                threads[(pid, event["tid"])] = args.get("name")
            continue
        if not number(event.get("ts")) or event["ts"] < 0:
            fail(where + ": ts is not a non-negative number of microseconds")
        if ph == "C":
            if not args:
                fail(where + ": a counter without series")
            for series, value in args.items():
                if not number(value):
                    fail("%s: counter series %r is not a number" % (where, series))
            counter = process["counters"].setdefault(event["name"], {"count": 0, "max": {}})
            counter["count"] += 1
            for series, value in args.items():
                counter["max"][series] = max(counter["max"].get(series, value), value)
        elif ph == "X":
            if not number(event.get("dur")) or event["dur"] < 0:
                fail(where + ": a complete slice needs a non-negative dur")
            process["slices"].append([event["name"], event["ts"], event["dur"], args, event["tid"]])
        elif ph in ("B", "E"):
            stack = stacks.setdefault((pid, event["tid"]), [])
            if ph == "B":
                stack.append(event)
            elif not stack:
                fail(where + ": E without B")
            else:
                begin = stack.pop()
                process["slices"].append([begin["name"], begin["ts"], event["ts"] - begin["ts"],
                                          begin.get("args", {}), event["tid"]])
        elif ph in ("i", "I"):
            scope = event.get("s", "t")
            if scope not in ("g", "p", "t"):
                fail(where + ": instant scope must be g, p or t")
            process["instants"].append([event["name"], event["ts"], scope, args])
    for (pid, tid), stack in stacks.items():
        if stack:
            fail("pid %d tid %d: B without E" % (pid, tid))
    # Slices of one thread nest: each starts after its enclosing one starts and ends before it ends.
    for process in processes.values():
        by_thread = {}
        for s in process["slices"]:
            by_thread.setdefault(s[4], []).append(s)
        for tid, slices in by_thread.items():
            slices.sort(key=lambda s: (s[1], -s[2]))
            open_ends = []
            for name, ts, dur, _, _ in slices:
                while open_ends and open_ends[-1] <= ts:
                    open_ends.pop()
                if open_ends and ts + dur > open_ends[-1] + 1e-3:
                    fail("pid %d tid %d: slice %r at %.3f overlaps its neighbour without nesting"
                         % (process["pid"], tid, name, ts))
                open_ends.append(ts + dur)
        if process["process"] is None:
            fail("pid %d has no process_name" % process["pid"])
        process["threads"] = {str(t): n for (p, t), n in threads.items() if p == process["pid"]}
    for process in sorted(processes.values(), key=lambda p: p["pid"]):
        print(json.dumps(process, sort_keys=True))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: check_trace.py TRACE.json")
    main(sys.argv[1])
