#!/usr/bin/env python3
"""Turn recorded GPU runs into rows of the estimator's fit calibration table.

    calibration_rows.py --events RUN.jsonl [--spec RUN.json] [--source TEXT] >> \
        testdata/estimator/fit_calibration.jsonl

RUN.jsonl is what `vramlab-worker --spec RUN.json` printed (one WorkerEvent per line); the spec
defaults to RUN.json or RUN.spec.json beside it. One row is printed per measured run: one for a
single run, one per point of a sweep or search (the spec's swept field set to the point's value,
the sweep removed). A row is one JSON object:

    {"name": ..., "source": ..., "spec": {ExperimentSpec JSON, limit included},
     "allocator": "native" | "expandable",
     "outcome": "FIT" | "OOM", "oom_phase": "BACKWARD" (OOM rows),
     "limit_bytes": N,  "peak_allocated_bytes": N, "peak_reserved_bytes": N,
     "worker_run": N}

worker_run is the run's place among the runs the log's one worker made (0: the worker's first,
a fresh process; a one-process sweep's later points ran after others in the same process, which
the estimate is told: EstimateOptions.after_other_points).
limit_bytes is the spec's memory.device_memory_limit_bytes, or, for a run without one, the
device's total memory from the worker's `started` event less the measured CUDA context (what the
caching allocator could have had). The peaks are the worker's measured anatomy of that run or
point (for an OOM: at the moment it ran out; a single run's from its oom event). Python 3
standard library only; exit status 0 or 2.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import (InputError, as_int, measured_runs, normalized, read_events,  # noqa: E402
                     spec_for_point, sweep_variable)


def default_spec(events_path):
    base = events_path
    for suffix in (".ours.jsonl", ".jsonl", ".events", ".log"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    for candidate in (base + ".json", base + ".spec.json"):
        if os.path.exists(candidate):
            return candidate
    raise InputError(f"{events_path}: no spec {base}.json or {base}.spec.json; pass --spec")


def oom_phases(events):
    """{sweep_index: phase} of every oom event."""
    phases = {}
    for e in events:
        if "oom" in e:
            memory = e["oom"].get("memory") or {}
            phases[as_int(memory.get("sweep_index"))] = e["oom"].get("phase") or memory.get("phase")
    return phases


def point_spec(spec, variable, value, started):
    """spec_for_point, naming the device the worker ran on when the spec leaves it to the default
    (the estimator models the CUDA allocator only for a CUDA spec)."""
    point = spec_for_point(spec, variable, value)
    if "device" not in point and started.get("device"):
        point["device"] = started["device"]
    return point


def rows(events_path, spec_path, source):
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    events = read_events(events_path)
    variable = sweep_variable(spec)
    flat = normalized(spec)
    limit = as_int((flat.get("memory") or {}).get("device_memory_limit_bytes"))
    expandable = bool(((flat.get("memory") or {}).get("allocator") or {}).get("expandable_segments"))
    started = next((e["started"] for e in events if "started" in e), {})
    phases = oom_phases(events)
    out = []
    runs = measured_runs(events)
    sweep_indices = [as_int(e["sweep_point"].get("sweep_index")) for e in events if "sweep_point" in e]
    oom_memory = next((e["oom"].get("memory") or {} for e in events if "oom" in e), {})
    for i, (label, value, anatomy, oom) in enumerate(runs):
        # A single run that ran out of memory has no report: its peaks are the ones its oom
        # event carries (the run's highest allocated and reserved up to the refusal).
        anatomy = anatomy or ({"peak_allocated_bytes": oom_memory.get("peak_allocated_bytes"),
                               "peak_reserved_bytes": oom_memory.get("peak_reserved_bytes")}
                              if oom and value is None else {})
        row_limit = limit
        if row_limit == 0:
            row_limit = as_int(started.get("device_total_bytes")) - as_int(
                anatomy.get("cuda_context_bytes"))
        name = os.path.basename(events_path)
        for suffix in (".ours.jsonl", ".jsonl", ".events", ".log"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        row = {
            "name": name if value is None else f"{name}@{value}",
            "source": source or events_path,
            "spec": point_spec(spec, variable, value, started),
            "allocator": "expandable" if expandable else "native",
            "outcome": "OOM" if oom else "FIT",
            "limit_bytes": row_limit,
            "peak_allocated_bytes": as_int(anatomy.get("peak_allocated_bytes")),
            "peak_reserved_bytes": as_int(anatomy.get("peak_reserved_bytes")),
            "worker_run": i,
        }
        if oom:
            index = sweep_indices[i] if i < len(sweep_indices) else 0
            row["oom_phase"] = phases.get(index, "PHASE_UNSPECIFIED")
        out.append(row)
    if not out:
        raise InputError(f"{events_path}: no report, sweep point or oom event")
    return out


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", required=True, nargs="+", help="worker event logs")
    parser.add_argument("--spec", help="the spec (only with one --events)")
    parser.add_argument("--source", help="what the row cites (default: the events path)")
    args = parser.parse_args(argv)
    if args.spec and len(args.events) != 1:
        print("calibration_rows.py: --spec needs exactly one --events", file=sys.stderr)
        return 2
    try:
        for path in args.events:
            for row in rows(path, args.spec or default_spec(path), args.source):
                print(json.dumps(row, sort_keys=True))
    except (InputError, OSError, ValueError, KeyError) as e:
        print(f"calibration_rows.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
