#!/usr/bin/env python3
"""The anatomy of the peak moment in worker logs, checked as the issue states it.

  peak_moments.py RUN.jsonl...

For each run's final report (and each sweep point's anatomy): the categories at peak allocated
sum to the allocated bytes of that moment, which is within 0.1 % of the run's peak allocated; the
allocator cache at peak reserved equals reserved - allocated at that moment, and that reserved is
the run's peak reserved. Prints the moment's categories (GiB) and the share left as "temporaries"
(the part no tensor the worker knows accounts for). Exits 1 if any check fails.
"""
import json
import sys

KEYS = ["weightsBytes", "adapterWeightsBytes", "quantizationConstantsBytes", "gradientsBytes",
        "optimizerStateBytes", "activationsBytes", "temporariesBytes"]
GIB = float(1 << 30)


def anatomies(path):
    for line in open(path):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if "report" in event:
            yield "report", event["report"].get("anatomy", {})
        elif "sweepPoint" in event:
            yield f"point {event['sweepPoint'].get('sweepIndex', 0)}", event["sweepPoint"].get("anatomy", {})


def check(anatomy):
    failures = []
    moment, reserved = anatomy.get("atPeakAllocated"), anatomy.get("atPeakReserved")
    if not moment or not reserved:
        return ["no peak moments in the anatomy"], ""
    cats = moment.get("categories", {})
    at_peak = int(moment.get("allocatedBytes", 0))
    peak = int(anatomy.get("peakAllocatedBytes", 0))
    total = sum(int(cats.get(k, 0)) for k in KEYS)
    if total != at_peak:
        failures.append(f"categories sum to {total}, the moment's allocated is {at_peak}")
    if peak == 0 or abs(at_peak - peak) > 0.001 * peak:
        failures.append(f"moment's allocated {at_peak} vs peak allocated {peak}")
    r, a, c = (int(reserved.get(k, 0)) for k in ("reservedBytes", "allocatedBytes", "allocatorCacheBytes"))
    if c != r - a:
        failures.append(f"cache {c} != reserved {r} - allocated {a}")
    peak_reserved = int(anatomy.get("peakReservedBytes", 0))
    if peak_reserved == 0 or abs(r - peak_reserved) > 0.001 * peak_reserved:
        failures.append(f"moment's reserved {r} vs peak reserved {peak_reserved}")
    shown = ", ".join(f"{k[:-5]} {int(cats.get(k, 0)) / GIB:.2f}" for k in KEYS if int(cats.get(k, 0)))
    line = (f"peak allocated {peak / GIB:.3f} GiB in {moment.get('phase', '?')} step {moment.get('step', 0)}: "
            f"{shown}; temporaries {100.0 * int(cats.get('temporariesBytes', 0)) / max(1, at_peak):.2f} %; "
            f"at peak reserved {r / GIB:.3f} GiB: allocated {a / GIB:.3f}, cache {c / GIB:.3f}")
    return failures, line


def main(paths):
    if not paths:
        sys.exit(__doc__)
    bad = 0
    for path in paths:
        for where, anatomy in anatomies(path):
            failures, line = check(anatomy)
            print(f"{path} {where}: {'ok' if not failures else 'FAIL'} {line}")
            for f in failures:
                print(f"    {f}")
            bad += bool(failures)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
