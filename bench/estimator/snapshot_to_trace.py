#!/usr/bin/env python3
"""Turn a CUDA allocator snapshot's history into an allocator trace for the estimator's tests.

    snapshot_to_trace.py SNAPSHOT.pickle [--device 0] [--limit BYTES] > NAME.trace

SNAPSHOT.pickle is what `torch.cuda.memory._snapshot()` dumps (the worker writes one to
memory.snapshot_path; `vramlab snapshot ID -o FILE` fetches it) with the allocator history
recorded. Its `device_traces` entries become the lines of testdata/estimator/traces/README.md:
alloc -> `alloc ID SIZE`, free_completed -> `free ID`, segment_alloc / segment_map ->
`segment_alloc SIZE`, segment_free / segment_unmap -> `segment_free SIZE`, oom -> `oom SIZE`,
segment releases that no allocation follows -> `empty_cache` (an empty_cache directly followed by
an allocation that maps a segment is read as that allocation's retry). A first `config` line carries the
snapshot's allocator settings (expandable segments, max_split_size) and --limit (the run's
device_memory_limit_bytes). Only the standard library: the pickle holds plain Python values.
The history keeps the last `max_entries` entries (the worker's: 250,000); a trace that does
not start at the allocator's start cannot replay, so record with a large enough history.
"""

import argparse
import json
import os
import pickle
import sys


def config_line(snapshot, limit):
    settings = snapshot.get("allocator_settings") or {}
    items = []
    if limit:
        items.append(f"limit={limit}")
    if settings.get("expandable_segments"):
        items.append("expandable=1")
    max_split = settings.get("max_split_size")
    if isinstance(max_split, int) and 0 < max_split < (1 << 62):
        items.append(f"max_split_size={max_split}")
    return "config " + " ".join(items) if items else None


def trace_lines(entries):
    ids = {}  # live address -> id
    next_id = 1
    pending_segments = False
    for entry in entries:
        action, addr, size = entry.get("action"), entry.get("addr"), int(entry.get("size", 0))
        if action in ("segment_alloc", "segment_map"):
            pending_segments = True
            # The address: best fit breaks ties by address, so a replay places segments where
            # cudaMalloc did (expandable pages map inside one range: their order is the offset's).
            yield f"segment_alloc {size} {addr}" if action == "segment_alloc" and addr is not None else f"segment_alloc {size}"
        elif action in ("segment_free", "segment_unmap"):
            pending_segments = True
            yield f"segment_free {size}"
        elif action == "alloc":
            ids[addr] = next_id
            yield f"alloc {next_id} {size}"
            next_id += 1
            pending_segments = False
        elif action == "free_completed" and addr in ids:
            if pending_segments:  # releases with no allocation after them: empty_cache
                yield "empty_cache"
                pending_segments = False
            yield f"free {ids.pop(addr)}"
        elif action == "oom":
            yield f"oom {size}"
            pending_segments = False
    if pending_segments:
        yield "empty_cache"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0, help="the run's memory limit in bytes")
    parser.add_argument("--raw", help="also write the history's action, addr, size and stream as JSON here")
    parser.add_argument("--expandable", action="store_true",
                        help="with a .json history (--raw's output): the run used expandable segments")
    args = parser.parse_args(argv)
    try:
        if args.snapshot.endswith(".json"):  # a history written by --raw: no settings in it
            with open(args.snapshot) as f:
                entries = [dict(zip(("action", "addr", "size", "stream"), e)) for e in json.load(f)]
            snapshot = {"allocator_settings": {"expandable_segments": args.expandable}}
        else:
            with open(args.snapshot, "rb") as f:
                snapshot = pickle.load(f)
            entries = snapshot["device_traces"][args.device]
    except (OSError, ValueError, pickle.UnpicklingError, KeyError, IndexError, TypeError) as e:
        print(f"snapshot_to_trace.py: {args.snapshot}: {e}", file=sys.stderr)
        return 2
    if args.raw:
        with open(args.raw, "w") as f:
            json.dump([[e.get("action"), e.get("addr"), e.get("size"), e.get("stream")] for e in entries], f)
            f.write("\n")
    print(f"# from {os.path.basename(args.snapshot)}, device {args.device}, {len(entries)} history entries")
    line = config_line(snapshot, args.limit)
    if line:
        print(line)
    for line in trace_lines(entries):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
