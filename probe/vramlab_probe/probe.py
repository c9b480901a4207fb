"""The probe's state: the phase the program is in, its steps, the sampler thread, the peak moment
and the reports. Phases come from hooks.py; readings from memory.py; lines from events.py.

Invariants:
  - `phase`, `step` and `micro_step` are written by the training thread only (hooks), read by the
    sampler thread; a sample may carry the phase of a boundary a moment old.
  - the peak moment is the sampled (or boundary) reading with the highest allocated bytes; its
    categories are the weights, gradients and optimizer state the probe counted at the last phase
    boundary, and activations the rest of allocated, so they sum to its allocated bytes whenever
    the rest is not negative (it is clipped at 0 otherwise).
"""
import atexit
import os
import pickle
import resource
import statistics
import sys
import threading
import time

from vramlab_probe import events, memory

PROBE_VERSION = "vramlab-probe 1"


class Probe:
    def __init__(self, fd, environ):
        self.writer = events.EventWriter(fd)
        self.device = environ.get("VRAMLAB_PROBE_DEVICE", "cpu")
        self.interval = max(1, int(environ.get("VRAMLAB_PROBE_SAMPLE_INTERVAL_MS", "10"))) / 1000.0
        self.memory_limit = int(environ.get("VRAMLAB_PROBE_MEMORY_LIMIT_BYTES", "0") or 0)
        self.cuda_device = int(environ.get("VRAMLAB_PROBE_CUDA_DEVICE", "0") or 0)
        snapshot_fd = environ.get("VRAMLAB_PROBE_SNAPSHOT_FD", "")
        self.snapshot_fd = int(snapshot_fd) if snapshot_fd else None
        self.snapshot_written = False
        self.start_time = time.monotonic()
        self.pid = os.getpid()
        self.torch = None
        self.reader = None
        self.phase = "SETUP"
        self.step = 0
        self.micro_step = -1
        self.counts = {"weights": 0, "gradients": 0, "optimizer_state": 0}
        self.max_counts = dict(self.counts)
        self.parameter_count = 0
        self.peak = None          # (allocated, categories, phase, step, micro_step)
        self.peak_reserved = None  # (reserved, allocated, phase, step, micro_step)
        self.peak_device_used = 0
        self.step_peak = (0, 0)
        self.step_times = []
        self.last_loss = None
        self.oom_reported = False
        self.sampler_seconds = 0.0
        self.lock = threading.Lock()  # guards the peaks and counts
        self.stop = threading.Event()
        self.thread = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self):
        from vramlab_probe import hooks

        atexit.register(self.finish)
        os.register_at_fork(after_in_child=self._forked)
        hooks.on_torch_import(self._torch_imported)

    def _forked(self):
        # A DataLoader worker or another fork of the program: not the experiment.
        self.writer.broken = True
        self.stop.set()

    def _torch_imported(self, torch):
        from vramlab_probe import hooks

        self.torch = torch
        cuda = self.device == "cuda" and torch.cuda.is_available()
        if cuda:
            self.reader = memory.CudaReader(torch, self.cuda_device)
            if self.memory_limit > 0:
                total = torch.cuda.mem_get_info(self.cuda_device)[1]
                torch.cuda.set_per_process_memory_fraction(min(1.0, self.memory_limit / total),
                                                           self.cuda_device)
            hooks.attach_oom_observer(torch, self)
            if self.snapshot_fd is not None:
                hooks.record_history(torch)
        else:
            self.reader = memory.CpuReader()
            if self.memory_limit > 0:
                cap = memory.data_segment_bytes() + self.memory_limit
                resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
        hooks.install(torch, self)
        self.writer.write("started", {
            "workerVersion": PROBE_VERSION,
            "torchVersion": torch.__version__,
            "device": self.reader.kind,
            "deviceName": self.reader.device_name(),
            "deviceTotalBytes": events.int64(self.reader.read()["device_total"]),
            "pid": self.pid,
        })
        if self.device == "cuda" and not cuda:
            self.notice("WARNING", "the daemon gave this command a GPU but torch.cuda is not "
                                   "available: memory is the process's resident set")
        self.thread = threading.Thread(target=self._sample_loop, name="vramlab-probe",
                                       daemon=True)
        self.thread.start()

    def finish(self):
        """At exit: stops the sampler, writes the snapshot and the final report."""
        if os.getpid() != self.pid or self.writer.broken:
            return
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=1.0)
        if self.reader is None:
            self._finish_without_torch()
            return
        self.sample()
        self.write_snapshot()
        self.writer.write("report", self._final_report())

    def _finish_without_torch(self):
        rss = memory.max_resident_bytes()
        self.writer.write("started", {"workerVersion": PROBE_VERSION, "device": "CPU",
                                      "pid": self.pid})
        self.notice("WARNING", "not a PyTorch program (torch was never imported): no allocator "
                               "readings, phases or anatomy; peak_device_used_bytes is the "
                               "process's peak resident set")
        self.writer.write("report", {"anatomy": {"peakDeviceUsedBytes": events.int64(rss)},
                                     "measuredBy": "PROCESS_RESIDENT_SET"})

    def notice(self, level, message):
        self.writer.write("notice", {"level": level, "message": message})

    # --- readings --------------------------------------------------------------------------

    def _sample_loop(self):
        while not self.stop.wait(self.interval):
            began = time.perf_counter()
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a reading that fails ends the readings only
                return
            self.sampler_seconds += time.perf_counter() - began

    def now(self):
        return time.monotonic() - self.start_time

    def reading(self):
        """One reading, folded into the peaks."""
        reading = self.reader.read()
        phase, step, micro = self.phase, self.step, max(0, self.micro_step)
        with self.lock:
            allocated, reserved = reading["allocated"], reading["reserved"]
            if self.peak is None or allocated > self.peak[0]:
                counted = dict(self.counts)
                rest = allocated - sum(counted.values())
                counted["activations"] = max(0, rest)
                self.peak = (allocated, counted, phase, step, micro)
            if self.peak_reserved is None or reserved > self.peak_reserved[0] or (
                    reserved == self.peak_reserved[0] and allocated > self.peak_reserved[1]):
                self.peak_reserved = (reserved, allocated, phase, step, micro)
            self.peak_device_used = max(self.peak_device_used, reading["device_used"])
            self.step_peak = (max(self.step_peak[0], allocated), max(self.step_peak[1], reserved))
        return reading

    def sample(self):
        reading = self.reading()
        self.writer.write("sample", events.sample_json(
            reading, self.phase, self.step, max(0, self.micro_step), self.now()))

    # --- phases (called by hooks on the training thread) -----------------------------------

    def phase_edge(self, phase, edge):
        if edge == "BEGIN":
            self.phase = phase
        reading = self.reading()
        self.writer.write("phase", {
            "phase": phase, "edge": edge, "step": self.step,
            "microStep": max(0, self.micro_step),
            "memory": events.sample_json(reading, phase, self.step, max(0, self.micro_step),
                                         self.now()),
        })

    def count_states(self, roots, optimizers):
        """Weights, gradients and optimizer state on the probe's device, each storage once."""
        torch = self.torch
        on_cuda = self.reader.kind == "CUDA"
        seen = set()
        counts = {"weights": 0, "gradients": 0, "optimizer_state": 0}
        parameters = 0

        def add(tensor, category):
            if not torch.is_tensor(tensor) or tensor.is_cuda != on_cuda:
                return
            try:
                storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") \
                    else tensor.storage()
                key = (storage.data_ptr(), tensor.device.index)
                size = storage.nbytes()
            except RuntimeError:
                return
            if key in seen or size == 0:
                return
            seen.add(key)
            counts[category] += size

        params = []
        for root in roots:
            params.extend(root.parameters())
        for optimizer in optimizers:
            for group in optimizer.param_groups:
                params.extend(group["params"])
        unique = {id(p): p for p in params}
        for p in unique.values():
            add(p, "weights")
        for p in unique.values():
            if p.grad is not None:
                add(p.grad, "gradients")
        for optimizer in optimizers:
            for state in optimizer.state.values():
                for value in state.values():
                    add(value, "optimizer_state")
        parameters = sum(p.numel() for p in unique.values())
        with self.lock:
            self.counts = counts
            for key, value in counts.items():
                self.max_counts[key] = max(self.max_counts[key], value)
            self.parameter_count = max(self.parameter_count, parameters)

    def step_ended(self, step_seconds, loss):
        with self.lock:
            peak_allocated, peak_reserved = self.step_peak
            self.step_peak = (0, 0)
        self.step_times.append(step_seconds)
        result = {"step": self.step, "stepTimeSeconds": events.double(step_seconds),
                  "peakAllocatedBytes": events.int64(peak_allocated),
                  "peakReservedBytes": events.int64(peak_reserved)}
        if loss is not None:
            result["loss"] = events.double(loss)
            self.last_loss = loss
        self.writer.write("step", result)

    # --- out of memory ---------------------------------------------------------------------

    def out_of_memory(self, requested, free, message):
        if self.oom_reported:
            return
        self.oom_reported = True
        reading = self.reader.read()
        self.writer.write("oom", {
            "phase": self.phase, "step": self.step, "microStep": max(0, self.micro_step),
            "requestedBytes": events.int64(requested), "freeBytes": events.int64(free),
            "message": message[:4096],
            "memory": events.sample_json(reading, self.phase, self.step,
                                         max(0, self.micro_step), self.now()),
        })
        self.write_snapshot()

    def write_snapshot(self):
        if self.snapshot_fd is None or self.snapshot_written or self.reader.kind != "CUDA":
            return
        try:
            snapshot = self.torch.cuda.memory._snapshot()
            with os.fdopen(self.snapshot_fd, "wb", closefd=False) as out:
                pickle.dump(snapshot, out)
            self.snapshot_written = True
        except Exception as error:  # noqa: BLE001
            self.notice("WARNING", f"allocator snapshot not written: {error}")

    # --- the final report ------------------------------------------------------------------

    def _final_report(self):
        exact = self.reader.exact_peaks()
        with self.lock:
            peak = self.peak or (0, {}, self.phase, self.step, 0)
            peak_reserved = self.peak_reserved or (0, 0, self.phase, self.step, 0)
            peak_allocated_bytes, peak_reserved_bytes = exact or (peak[0], peak_reserved[0])
            counted = peak[1]
            anatomy = {
                "weightsBytes": events.int64(self.max_counts["weights"]),
                "gradientsBytes": events.int64(self.max_counts["gradients"]),
                "optimizerStateBytes": events.int64(self.max_counts["optimizer_state"]),
                "activationsBytes": events.int64(counted.get("activations", 0)),
                "allocatorCacheBytes": events.int64(peak_reserved[0] - peak_reserved[1]),
                "peakAllocatedBytes": events.int64(peak_allocated_bytes),
                "peakReservedBytes": events.int64(peak_reserved_bytes),
                "peakDeviceUsedBytes": events.int64(self.peak_device_used),
                "fragmentationRatio": events.double(
                    1.0 - peak_reserved[1] / peak_reserved[0] if peak_reserved[0] else 0.0),
                "atPeakAllocated": {
                    "allocatedBytes": events.int64(peak[0]),
                    "categories": events.categories_json(counted),
                    "phase": peak[2], "step": peak[3], "microStep": peak[4],
                },
                "atPeakReserved": {
                    "reservedBytes": events.int64(peak_reserved[0]),
                    "allocatedBytes": events.int64(peak_reserved[1]),
                    "allocatorCacheBytes": events.int64(peak_reserved[0] - peak_reserved[1]),
                    "phase": peak_reserved[2], "step": peak_reserved[3],
                    "microStep": peak_reserved[4],
                },
            }
            if self.reader.kind == "CUDA":
                anatomy["cudaContextBytes"] = events.int64(
                    max(0, self.peak_device_used - peak_reserved_bytes))
        elapsed = max(1e-9, self.now())
        report = {
            "anatomy": anatomy,
            "parameterCount": events.int64(self.parameter_count),
            "deviceName": self.reader.device_name(),
            "snapshotWritten": self.snapshot_written,
            "samplerOverheadRatio": events.double(self.sampler_seconds / elapsed),
        }
        if self.step_times:
            report["medianStepTimeSeconds"] = events.double(statistics.median(self.step_times))
        if self.last_loss is not None:
            report["finalLoss"] = events.double(self.last_loss)
        return report
