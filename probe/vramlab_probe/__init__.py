"""The vramlab probe: live memory readings, phases, steps, anatomy and out-of-memory reports of a
command experiment's own PyTorch program, written as the worker's WorkerEvent JSON lines on the fd
vramlabd passes (docs/COMMANDS.md). Standard library and torch only; activated by sitecustomize.py
when VRAMLAB_PROBE=1.

Environment (set by the daemon):
  VRAMLAB_PROBE_EVENTS_FD           fd the events go to (3)
  VRAMLAB_PROBE_DEVICE              cuda or cpu
  VRAMLAB_PROBE_CUDA_DEVICE         the CUDA device index the program trains on (its LOCAL_RANK)
  VRAMLAB_PROBE_SAMPLE_INTERVAL_MS  sampler period
  VRAMLAB_PROBE_MEMORY_LIMIT_BYTES  0: none; CUDA: set_per_process_memory_fraction; CPU: RLIMIT_DATA
                                    at the data segment when torch was imported plus the limit
  VRAMLAB_PROBE_SNAPSHOT_FD         set with record_history: the allocator snapshot is written there
"""
import os

_PROBE = None


def activate():
    """Starts the probe in this process, once. Returns the probe, or None when the environment does
    not ask for one or the events fd is not open."""
    global _PROBE
    if _PROBE is not None:
        return _PROBE
    try:
        fd = int(os.environ.get("VRAMLAB_PROBE_EVENTS_FD", "3"))
        os.fstat(fd)
    except (ValueError, OSError):
        return None
    # Processes the program starts are not the experiment: they never report.
    os.environ["VRAMLAB_PROBE"] = "0"
    from vramlab_probe.probe import Probe

    _PROBE = Probe(fd, os.environ)
    _PROBE.start()
    return _PROBE
