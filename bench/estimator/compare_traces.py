#!/usr/bin/env python3
"""Sets a predicted allocation sequence beside a recorded one, large blocks only.

    vramlab-estimate --spec SPEC.json --allocations > predicted.trace
    python3 bench/estimator/compare_traces.py RECORDED.trace predicted.trace [--min-bytes N]

Both files are in the trace format of testdata/estimator/traces/README.md (segment lines and
comments are skipped; the predicted file's comments name each line's phase, step and
micro-step). Prints one row per allocation or free of a block larger than --min-bytes (default
1 MiB, the caching allocator's small-pool limit: these are the blocks whose places decide the
large segments), the two sequences side by side with each side's allocated bytes in large blocks
after the line, so the first row where the two orders part is easy to find. Exit status 2 on a
line that is not an operation of the format.
"""
import argparse
import sys


def large_ops(path, min_bytes):
    """(text, allocated MiB after it) for each operation on a block above min_bytes."""
    sizes, rows, allocated = {}, [], 0
    with open(path) as f:
        for number, line in enumerate(f, 1):
            body, _, comment = line.partition("#")
            words = body.split()
            if not words or words[0] in ("segment_alloc", "segment_free", "config", "check"):
                continue
            if words[0] == "alloc" and len(words) == 3:
                sizes[words[1]] = int(words[2])
                size, sign = sizes[words[1]], "+"
            elif words[0] == "free" and len(words) == 2:
                size, sign = sizes.pop(words[1], 0), "-"
            elif words[0] in ("oom", "empty_cache"):
                continue
            else:
                sys.exit(f"compare_traces: {path}:{number}: not a trace operation: {line.strip()}")
            if size <= min_bytes:
                continue
            allocated += size if sign == "+" else -size
            where = " ".join(comment.split()[:3])
            rows.append((f"{sign}{size / 2**20:.2f} {where}".strip(), allocated / 2**20))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recorded")
    parser.add_argument("predicted")
    parser.add_argument("--min-bytes", type=int, default=1 << 20)
    args = parser.parse_args()
    recorded = large_ops(args.recorded, args.min_bytes)
    predicted = large_ops(args.predicted, args.min_bytes)
    print(f"{'#':>5}  {'recorded MiB':<28}{'allocated':>10}   {'predicted MiB':<28}{'allocated':>10}")
    for i in range(max(len(recorded), len(predicted))):
        r = recorded[i] if i < len(recorded) else ("", None)
        p = predicted[i] if i < len(predicted) else ("", None)
        fmt = lambda v: f"{v:10.2f}" if v is not None else " " * 10
        print(f"{i:5}  {r[0]:<28}{fmt(r[1])}   {p[0]:<28}{fmt(p[1])}")


if __name__ == "__main__":
    main()
