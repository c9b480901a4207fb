#!/usr/bin/env python3
"""Every row of the fit calibration table with its predicted verdict, and the counts.

    fit_table.py [--table testdata/estimator/fit_calibration.jsonl]
                 [--estimator build/bin/vramlab-estimate] [--format text|markdown]

For each row (testdata/estimator/README.md): the allocator, the limit, the predicted peak
allocated, reserved low .. high at the deciding phase, the verdict and the measured outcome,
marking a contradiction (FITS that ran out of memory, DOES_NOT_FIT that fit) with "!!"; then
the FITS / TIGHT / DOES_NOT_FIT counts against the outcome. fit_calibration_test fails on a
contradiction; this shows where the rows sit. Python 3 standard library only. Exit status: 0,
1 when a row contradicts its verdict, 2 bad input.
"""

import argparse
import json
import os
import subprocess
import sys

GIB = 1 << 30


def estimate(estimator, spec, limit):
    result = subprocess.run([estimator, "--spec", "-", "--limit-bytes", str(limit)],
                            input=json.dumps(spec), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ValueError(f"{estimator}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", default=os.path.join("testdata", "estimator",
                                                        "fit_calibration.jsonl"))
    parser.add_argument("--estimator", default=os.path.join("build", "bin", "vramlab-estimate"))
    parser.add_argument("--format", choices=["text", "markdown"], default="text")
    args = parser.parse_args(argv)
    rows, counts, contradictions = [], {}, 0
    try:
        with open(args.table, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                e = estimate(args.estimator, row["spec"], int(row["limit_bytes"]))
                verdict, outcome = e.get("verdict", "FIT_VERDICT_UNSPECIFIED"), row["outcome"]
                bad = (verdict == "FITS" and outcome == "OOM") or (
                    verdict == "DOES_NOT_FIT" and outcome == "FIT")
                contradictions += bad
                counts[(verdict, outcome)] = counts.get((verdict, outcome), 0) + 1
                rows.append(["!!" if bad else "", row["name"], row.get("allocator", ""),
                             f"{int(row['limit_bytes']) / GIB:.2f}",
                             f"{int(e['anatomy']['peakAllocatedBytes']) / GIB:.2f}",
                             f"{int(e.get('reservedLowBytes', 0)) / GIB:.2f} .. "
                             f"{int(e.get('reservedHighBytes', 0)) / GIB:.2f}",
                             e.get("decidingPhase", ""), verdict, outcome])
    except (OSError, ValueError, KeyError) as err:
        print(f"fit_table.py: {err}", file=sys.stderr)
        return 2
    header = ["", "row", "allocator", "limit GiB", "peak alloc GiB", "reserved GiB", "phase",
              "verdict", "outcome"]
    summary = [[v, str(counts.get((v, "FIT"), 0)), str(counts.get((v, "OOM"), 0))]
               for v in ("FITS", "TIGHT", "DOES_NOT_FIT")]
    for head, body in ((header, rows), (["verdict", "fit", "ran out of memory"], summary)):
        if args.format == "markdown":
            print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
            for r in body:
                print("| " + " | ".join(r) + " |")
        else:
            widths = [max(len(x) for x in col) for col in zip(head, *body)]
            for r in [head] + body:
                print("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip())
        print()
    return 1 if contradictions else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
