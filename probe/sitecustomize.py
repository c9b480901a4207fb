"""Activates the vramlab probe in a command experiment's Python process.

vramlabd puts this directory first on a command's PYTHONPATH (docs/COMMANDS.md), so every Python
interpreter the command starts imports this module at startup. It does nothing unless the daemon's
environment says so (VRAMLAB_PROBE=1 and the events fd open); whatever happens to the probe, the
user's program runs.
"""
import os as _os

if _os.environ.get("VRAMLAB_PROBE") == "1":
    try:
        import vramlab_probe as _vramlab_probe

        _vramlab_probe.activate()
    except Exception as _error:  # noqa: BLE001 - the program must run without its probe
        import sys as _sys

        print(f"vramlab probe: not active: {_error}", file=_sys.stderr)
