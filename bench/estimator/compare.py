#!/usr/bin/env python3
"""Put the estimator's predictions next to what vramlab-worker measured.

    compare.py --events DIR [--specs DIR] [--estimator PATH] [--format text|markdown|csv]

DIR holds worker event logs, one JSON WorkerEvent per line (what `vramlab-worker --spec S.json`
prints), named NAME.jsonl (or .events / .log; where several share a NAME, the first of these is
the log and NAME.log is taken as the worker's stderr). The spec of NAME.jsonl is NAME.json or
NAME.spec.json (as bench/gpu/optimizer_modes.py writes them), looked up in --specs (default:
DIR). Each log's final `report` (and each `sweepPoint` of a sweep) is compared with
`vramlab-estimate --spec` for the same spec (for a sweep point: the swept field set to the
point's value). Prints, per run and sweep point, predicted / measured / error for every anatomy
category and the peaks, then a summary with, for each sweep, the largest point that fits and the
smallest that runs out of memory among the points it ran (bisected sweeps run them out of
order), predicted and measured.

Python 3 standard library only. Exit status: 0 printed, 2 bad input.
"""

import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys

CATEGORIES = [
    "weights_bytes",
    "gradients_bytes",
    "optimizer_state_bytes",
    "activations_bytes",
    "temporary_buffers_bytes",
    "allocator_cache_bytes",
    "cuda_context_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "peak_device_used_bytes",
]
LOG_SUFFIXES = (".jsonl", ".events", ".log")


class InputError(Exception):
    pass


def snake(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def normalized(value):
    """Proto JSON accepts camelCase and snake_case names; use snake_case throughout."""
    if isinstance(value, dict):
        return {snake(k): normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def as_int(value):
    return int(value) if value not in (None, "") else 0


def read_events(path):
    events = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                events.append(normalized(json.loads(line)))
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{number}: not JSON: {e}") from e
    return events


def measured_runs(events):
    """[(label, value or None, anatomy dict or None, oom bool)] of one log."""
    reports = [e["report"] for e in events if "report" in e]
    points = [e["sweep_point"] for e in events if "sweep_point" in e]
    oom = any("oom" in e for e in events)
    if points:
        return [
            (f"point {p.get('sweep_index', 0)}", as_int(p.get("value")),
             p.get("anatomy") or {}, bool(p.get("oom", False)))
            for p in points
        ]
    if reports:
        return [("run", None, reports[-1].get("anatomy") or {}, oom)]
    if oom:
        return [("run", None, None, True)]
    return []


def spec_for_point(spec, variable, value):
    """The spec with the swept field set to `value` and the sweep removed."""
    spec = json.loads(json.dumps(spec))
    spec.pop("sweep", None)
    if value is None:
        return spec
    training = spec.setdefault("training", {})
    names = {"SEQ_LEN": ("seqLen", "seq_len"),
             "MICRO_BATCH_SIZE": ("microBatchSize", "micro_batch_size")}[variable]
    for name in names:
        training.pop(name, None)
    training[names[0]] = value
    return spec


def sweep_variable(spec):
    sweep = normalized(spec.get("sweep") or {})
    variable = sweep.get("variable", "SEQ_LEN")
    if isinstance(variable, int):
        variable = {1: "SEQ_LEN", 2: "MICRO_BATCH_SIZE"}.get(variable, "SEQ_LEN")
    return "SEQ_LEN" if variable in ("SWEEP_VARIABLE_UNSPECIFIED", "") else variable


def predict(estimator, spec):
    result = subprocess.run([estimator, "--spec", "-"], input=json.dumps(spec),
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise InputError(f"{estimator} failed: {result.stderr.strip()}")
    return normalized(json.loads(result.stdout))


def error_ratio(predicted, measured):
    """(predicted - measured) / measured; None when measured is 0 and predicted is not."""
    if measured == 0:
        return 0.0 if predicted == 0 else None
    return (predicted - measured) / measured


def fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.3f} {unit}"
    return f"{n} B"


def fmt_error(ratio):
    return "n/a" if ratio is None else f"{ratio * 100:+.1f}%"


def compare_log(name, events_path, spec_path, estimator):
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    variable = sweep_variable(spec)
    rows = []
    for label, value, anatomy, oom in measured_runs(read_events(events_path)):
        estimate = predict(estimator, spec_for_point(spec, variable, value))
        rows.append({"name": name, "label": label, "value": value, "oom": oom,
                     "measured": anatomy, "estimate": estimate})
    if not rows:
        raise InputError(f"{events_path}: no report, sweep point or oom event")
    return rows


def category_table(row):
    predicted = row["estimate"].get("anatomy", {})
    measured = row["measured"] or {}
    lines = []
    for category in CATEGORIES:
        p, m = as_int(predicted.get(category)), as_int(measured.get(category))
        lines.append([category.replace("_bytes", ""), fmt_bytes(p),
                      fmt_bytes(m) if row["measured"] is not None else "-",
                      fmt_error(error_ratio(p, m)) if row["measured"] is not None else "-"])
    return lines


def boundary(rows, oom):
    """(largest value that fits, smallest value that runs out of memory) by `oom(row)`."""
    fits = [row["value"] for row in rows if not oom(row)]
    ooms = [row["value"] for row in rows if oom(row)]
    return (max(fits) if fits else None), (min(ooms) if ooms else None)


def summary(rows_by_log):
    lines = []
    for name, rows in rows_by_log:
        for row in rows:
            anatomy = row["estimate"].get("anatomy", {})
            predicted = as_int(anatomy.get("peak_allocated_bytes"))
            measured = as_int((row["measured"] or {}).get("peak_allocated_bytes"))
            point = row["label"] if row["value"] is None else f"{row['label']} = {row['value']}"
            lines.append([name, point, fmt_bytes(predicted),
                          "OOM" if row["oom"] else fmt_bytes(measured),
                          "-" if row["oom"] else fmt_error(error_ratio(predicted, measured)),
                          predicted_verdict(row["estimate"]),
                          "no" if row["oom"] else "yes",
                          str(row["estimate"].get("peak_phase", ""))])
    return lines


def predicted_verdict(estimate):
    """FITS / TIGHT / DOES_NOT_FIT; "no limit" without one (docs/ESTIMATOR.md, "Does it fit")."""
    verdict = estimate.get("verdict", "FIT_VERDICT_UNSPECIFIED")
    return "no limit" if verdict == "FIT_VERDICT_UNSPECIFIED" else verdict


def sweep_summary(rows_by_log):
    lines = []
    for name, rows in rows_by_log:
        if rows[0]["value"] is None:
            continue
        predicted = boundary(rows, lambda r: not r["estimate"].get("fits", False))
        measured = boundary(rows, lambda r: r["oom"])
        lines.append([name, str(predicted[0]), str(measured[0]), str(predicted[1]), str(measured[1])])
    return lines


def render(fmt, title, header, lines, out):
    if fmt == "csv":
        writer = csv.writer(out)
        writer.writerow([title])
        writer.writerow(header)
        writer.writerows(lines)
        return
    if fmt == "markdown":
        out.write(f"\n**{title}**\n\n| " + " | ".join(header) + " |\n")
        out.write("|" + "---|" * len(header) + "\n")
        for line in lines:
            out.write("| " + " | ".join(line) + " |\n")
        return
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    out.write(f"\n{title}\n")
    for line in [header] + lines:
        out.write("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() + "\n")


def find_logs(directory):
    """One log per NAME: the first suffix of LOG_SUFFIXES present."""
    by_name = {}
    for suffix in reversed(LOG_SUFFIXES):
        for f in os.listdir(directory):
            if f.endswith(suffix) and not f.endswith(".spec.json"):
                by_name[f[: -len(suffix)]] = f
    if not by_name:
        raise InputError(f"{directory}: no event logs ({', '.join(LOG_SUFFIXES)})")
    return sorted(by_name.values())


def find_spec(directory, name):
    for candidate in (name + ".json", name + ".spec.json"):
        path = os.path.join(directory, candidate)
        if os.path.exists(path):
            return path
    return None


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", required=True, help="directory of worker event logs")
    parser.add_argument("--specs",
                        help="directory of NAME.json / NAME.spec.json specs (default: --events)")
    parser.add_argument("--estimator", default=os.path.join("build", "bin", "vramlab-estimate"),
                        help="path of vramlab-estimate (default: build/bin/vramlab-estimate)")
    parser.add_argument("--format", choices=["text", "markdown", "csv"], default="text")
    args = parser.parse_args(argv)
    specs = args.specs or args.events
    try:
        rows_by_log = []
        for log in find_logs(args.events):
            name = os.path.splitext(log)[0]
            spec_path = find_spec(specs, name)
            if spec_path is None:
                raise InputError(
                    f"{log}: no spec {os.path.join(specs, name + '.json')} (or .spec.json)")
            rows_by_log.append(
                (name, compare_log(name, os.path.join(args.events, log), spec_path, args.estimator)))
    except (InputError, OSError, ValueError) as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    out = io.StringIO()
    header = ["category", "predicted", "measured", "error"]
    for name, rows in rows_by_log:
        for row in rows:
            point = "" if row["value"] is None else f" ({row['label']}, value {row['value']})"
            render(args.format, f"{name}{point}" + (" — measured: OOM" if row["oom"] else ""),
                   header, category_table(row), out)
    render(args.format, "Peak allocated: predicted vs measured",
           ["experiment", "point", "predicted", "measured", "error", "predicted verdict",
            "measured fit", "predicted peak phase"], summary(rows_by_log), out)
    sweeps = sweep_summary(rows_by_log)
    if sweeps:
        render(args.format, "Fitting boundary of each sweep, over the points it ran",
               ["experiment", "largest fit predicted", "largest fit measured", "smallest OOM predicted",
                "smallest OOM measured"], sweeps, out)
    sys.stdout.write(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
