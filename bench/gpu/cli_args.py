"""The command line the GPU benchmark scripts share: `run OUTDIR [BIN_DIR] ...` or `table OUTDIR`."""
import os
import sys


def run_or_table(doc):
    """(command, OUTDIR created if missing, path of vramlab-worker under BIN_DIR, the words after
    BIN_DIR); exits with `doc` when the command is neither "run" nor "table"."""
    if len(sys.argv) < 3 or sys.argv[1] not in ("run", "table"):
        sys.exit(doc)
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    binary = os.path.join(sys.argv[3] if len(sys.argv) > 3 else "build-gpu/bin", "vramlab-worker")
    return sys.argv[1], out, binary, sys.argv[4:]


def known_or_exit(what, names, known):
    """Exits naming the unknown ones when `names` holds a word outside `known`."""
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}")
