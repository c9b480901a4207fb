#!/usr/bin/env python3
"""The family rows of the GPU benchmark (specs.py FAMILY_ROWS) against their two targets.

  family_table.py OUTDIR [--estimator PATH] [--rows ROW,...]

OUTDIR is what bench/gpu/families.sh (run.sh) wrote: ROW.spec.json, ROW.ours.jsonl, ROW.hf.jsonl.
One markdown row per family row that has a spec there:
- vramlab's and HF's outcome (ok, or the phase of the out-of-memory error) and peak allocated over
  the whole run (the caching allocator's, on both sides), and their difference; target: the same
  outcome in the same phase, and peak allocated within 0.5 % of HF's where both ran.
- with --estimator (vramlab-estimate, which needs no GPU): its predicted peak allocated and verdict
  for the same spec, and the prediction's error against vramlab's measured peak; target: within
  3 % where the row ran, DOES_NOT_FIT where it ran out of memory.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import specs  # noqa: E402
import table  # noqa: E402

GIB = 2**30
PEAK_TOLERANCE = 0.005  # vramlab against HF
ESTIMATE_TOLERANCE = 0.03  # the estimator against vramlab's measurement


def ours_outcome(folder, row):
    """(outcome, peak allocated bytes): outcome "ok", "OOM in PHASE (step N)", or "no result"."""
    events = table.read_jsonl(os.path.join(folder, f"{row}.ours.jsonl"))
    oom = next((e["oom"] for e in events if "oom" in e), None)
    report = next((e["report"] for e in events if "report" in e), None)
    peaks = [table.num(e["step"].get("peakAllocatedBytes")) for e in events if "step" in e]
    if report is not None:
        peaks.append(table.num(report.get("anatomy", {}).get("peakAllocatedBytes")))
    if oom is not None:
        peaks.append(table.num(oom.get("memory", {}).get("peakAllocatedBytes")))
        return f"OOM in {oom.get('phase', '?').lower()} (step {oom.get('step', '?')})", max(peaks)
    if report is None:
        return "no result", max(peaks or [0])
    return "ok", max(peaks)


def hf_outcome(folder, row):
    results = table.read_jsonl(os.path.join(folder, f"{row}.hf.jsonl"))
    if not results:
        return "no result", 0
    last = results[-1]
    outcome = "ok" if last.get("outcome") == "ok" else f"OOM in {last.get('oom_phase', '?')}"
    return outcome, last.get("peak_allocated_bytes", 0)


def phase_of(outcome):
    """"ok", or the phase of an OOM outcome without the step."""
    return outcome.split(" (")[0]


def estimate(estimator, spec_path):
    """(predicted peak allocated bytes, verdict, peak phase) from vramlab-estimate."""
    out = subprocess.run([estimator, "--spec", spec_path], check=True, capture_output=True, text=True).stdout
    e = json.loads(out)
    return int(e["predictedPeakBytes"]), e["verdict"], e["peakPhase"].lower()


def gib(b):
    return f"{b / GIB:.2f}" if b else "—"


def pct(a, b):
    return (a / b - 1) if a and b else None


def fmt_pct(x):
    return f"{100 * x:+.2f} %" if x is not None else "—"


def setup_of(spec):
    t = spec["training"]
    what = "LoRA r=%d" % t["adapter"]["rank"] if "adapter" in t else "full"
    limit = int(spec["memory"].get("deviceMemoryLimitBytes", 0)) / GIB
    return (f"{spec['model']['preset']}, {what}, mb {t['microBatchSize']} × seq {t['seqLen']}, "
            + (f"{limit:.0f} GiB" if limit else "no limit"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--estimator", help="path of vramlab-estimate: adds the predicted peak per row")
    parser.add_argument("--rows", help="comma-separated rows of specs.py instead of the family rows")
    args = parser.parse_args()
    names = args.rows.split(",") if args.rows else [r[0] for r in specs.FAMILY_ROWS]
    head = "| row | setup | vramlab | HF | peak allocated vramlab / HF (GiB) | vramlab vs HF | same outcome |"
    rule = "|---|---|---|---|---|---|---|"
    if args.estimator:
        head += " predicted peak (GiB), verdict | predicted vs vramlab |"
        rule += "---|---|"
    print(head)
    print(rule)
    checks = []
    for row in names:
        spec_path = os.path.join(args.folder, f"{row}.spec.json")
        if not os.path.exists(spec_path):
            continue
        spec = json.load(open(spec_path))
        o_outcome, o_peak = ours_outcome(args.folder, row)
        # A row compared with another row's HF run (specs.py hf-from) reads that row's.
        h_outcome, h_peak = hf_outcome(args.folder, specs.ROWS[row][2] if row in specs.ROWS else row)
        both_ran = o_outcome == "ok" and h_outcome == "ok"
        same = phase_of(o_outcome) == h_outcome and h_outcome != "no result"
        vs_hf = pct(o_peak, h_peak) if both_ran else None
        line = (f"| {row} | {setup_of(spec)} | {o_outcome} | {h_outcome} | {gib(o_peak)} / {gib(h_peak)} | "
                f"{fmt_pct(vs_hf)} | {'yes' if same else 'NO'} |")
        missing = [side for side, outcome in (("vramlab", o_outcome), ("HF", h_outcome)) if outcome == "no result"]
        if missing:
            checks.append(f"{row}: no result on {'either side' if len(missing) == 2 else missing[0]}")
        else:
            checks.append(f"{row}: same outcome as HF: {'met' if same else 'MISSED'}")
        if both_ran:
            ok = abs(vs_hf) <= PEAK_TOLERANCE
            checks.append(f"{row}: peak allocated within 0.5 % of HF's ({fmt_pct(vs_hf)}): "
                          f"{'met' if ok else 'MISSED'}")
        if args.estimator:
            predicted, verdict, peak_phase = estimate(args.estimator, spec_path)
            error = pct(predicted, o_peak) if o_outcome == "ok" else None
            line += f" {gib(predicted)}, {verdict} (peak in {peak_phase}) | {fmt_pct(error)} |"
            if o_outcome == "ok":
                ok = abs(error) <= ESTIMATE_TOLERANCE
                checks.append(f"{row}: predicted peak within 3 % ({fmt_pct(error)}): {'met' if ok else 'MISSED'}")
            elif o_outcome.startswith("OOM"):
                ok = verdict == "DOES_NOT_FIT"
                checks.append(f"{row}: predicted not to fit ({verdict}): {'met' if ok else 'MISSED'}")
        print(line)
    print()
    for check in checks:
        print(f"- {check}")


if __name__ == "__main__":
    main()
