#!/usr/bin/env python3
"""Where the time of a training step goes, per phase, from worker event logs.

  step_phases.py FILE.jsonl...

For each log: the median over the steps after the first (the warm-up) of the step time and of the
FORWARD, BACKWARD, OPTIMIZER_STEP and ZERO_GRAD phases (end reading's time - begin reading's; a
phase ends when the host returns from it, so device work it queued may finish in a later phase;
the step time ends after a device synchronize). Also prints the optimizer notice (which
implementation ran) when the log has one.
"""
import json
import statistics
import sys

PHASES = ["FORWARD", "BACKWARD", "OPTIMIZER_STEP", "ZERO_GRAD"]


def summarize(path):
    begins, durations, steps, describe = {}, {}, [], ""
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            if "notice" in e and e["notice"].get("message", "").startswith("optimizer: "):
                describe = e["notice"]["message"][len("optimizer: "):]
            if "step" in e and int(e["step"].get("step", 0)) >= 1:
                steps.append(float(e["step"]["stepTimeSeconds"]))
            if "phase" not in e:
                continue
            p = e["phase"]
            key = (p.get("phase"), int(p.get("step", 0)), int(p.get("microStep", 0)))
            t = float(p["memory"]["timeSeconds"])
            if p["edge"] == "BEGIN":
                begins[key] = t
            elif key in begins and key[1] >= 1:
                durations.setdefault(key[0], []).append(t - begins.pop(key))
    cells = [f"{statistics.median(steps):.3f}" if steps else "—"]
    cells += [f"{statistics.median(durations[ph]):.3f}" if durations.get(ph) else "—" for ph in PHASES]
    return cells, describe


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("| run | step (s) | " + " | ".join(f"{p.lower()} (s)" for p in PHASES) + " | optimizer |")
    print("|---|" + "---|" * (len(PHASES) + 2))
    for path in sys.argv[1:]:
        cells, describe = summarize(path)
        # The folder too: runs of one row under different settings share the file name.
        name = "/".join(path.rsplit("/", 2)[-2:]).replace(".ours.jsonl", "").replace(".jsonl", "")
        print(f"| {name} | " + " | ".join(cells) + f" | {describe} |")


if __name__ == "__main__":
    main()
