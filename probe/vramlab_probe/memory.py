"""Memory readings of the process the probe runs in.

CUDA: the caching allocator's own counters (torch.cuda.memory_stats) and the driver's view
(torch.cuda.mem_get_info: total - free, which includes the CUDA context and other processes).

CPU: PyTorch 1.13-2.x keeps no allocator statistics for CPU tensors, so the probe reads the
process: `allocated` (== `reserved`, `active`) is the growth of the resident set size since the
probe's baseline (taken when torch had been imported, before the program's first tensor), and the
"driver view" (`device_used`) is the whole resident set size. What the C library's malloc keeps
after a free stays in the resident set, so the CPU numbers are an upper bound on live tensors.
"""
import os
import resource

_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes():
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * _PAGE


def data_segment_bytes():
    """VmData of /proc/self/status: what RLIMIT_DATA counts."""
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def max_resident_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _empty(device_used=0, device_total=0):
    return {
        "allocated": 0, "reserved": 0, "active": 0, "inactive_split": 0, "requested": 0,
        "peak_allocated": 0, "peak_reserved": 0, "alloc_retries": 0, "oom_count": 0,
        "device_used": device_used, "device_total": device_total, "fragmentation": 0.0,
    }


class CpuReader:
    kind = "CPU"

    def __init__(self):
        self.baseline = resident_bytes()
        self.peak = 0
        try:
            with open("/proc/meminfo", "rb") as meminfo:
                self.total = int(meminfo.readline().split()[1]) * 1024
        except OSError:
            self.total = 0
        self.oom_count = 0

    def device_name(self):
        return "cpu"

    def read(self):
        rss = resident_bytes()
        allocated = max(0, rss - self.baseline)
        self.peak = max(self.peak, allocated)
        reading = _empty(rss, self.total)
        reading.update(allocated=allocated, reserved=allocated, active=allocated,
                       requested=allocated, peak_allocated=self.peak, peak_reserved=self.peak,
                       oom_count=self.oom_count)
        return reading

    def exact_peaks(self):
        """(peak allocated, peak reserved) as the allocator counts them; None: sampled only."""
        return None


class CudaReader:
    kind = "CUDA"

    def __init__(self, torch, device):
        """`device`: the index the program trains on among the devices it sees (its LOCAL_RANK
        in a gang, which every rank sees whole); the sampler thread reads it by index, since the
        current device is per thread."""
        self.torch = torch
        self.device = device
        self._nested = getattr(torch._C, "_cuda_memoryStats", None)

    def device_name(self):
        return self.torch.cuda.get_device_name(self.device)

    def _stats(self):
        """(allocated, reserved, active, inactive_split, requested, peak allocated, peak reserved,
        retries, ooms) of the device. Read from the allocator's nested statistics when torch has
        them: torch.cuda.memory_stats flattens and sorts every counter of every pool in Python,
        which costs the training thread the GIL for far longer than the nine numbers read here."""
        if self._nested is not None:
            stats = self._nested(self.device)

            def get(name, key="current"):
                return stats.get(name, {}).get("all", {}).get(key, 0)

            return (get("allocated_bytes"), get("reserved_bytes"), get("active_bytes"),
                    get("inactive_split_bytes"), get("requested_bytes"),
                    get("allocated_bytes", "peak"), get("reserved_bytes", "peak"),
                    stats.get("num_alloc_retries", 0), stats.get("num_ooms", 0))
        stats = self.torch.cuda.memory_stats(self.device)
        return tuple(stats.get(key, 0) for key in (
            "allocated_bytes.all.current", "reserved_bytes.all.current",
            "active_bytes.all.current", "inactive_split_bytes.all.current",
            "requested_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.peak",
            "num_alloc_retries", "num_ooms"))

    def read(self):
        (allocated, reserved, active, inactive_split, requested, peak_allocated, peak_reserved,
         retries, ooms) = self._stats()
        free, total = self.torch.cuda.mem_get_info(self.device)
        reading = _empty(total - free, total)
        reading.update(
            allocated=allocated, reserved=reserved, active=active, inactive_split=inactive_split,
            requested=requested, peak_allocated=peak_allocated, peak_reserved=peak_reserved,
            alloc_retries=retries, oom_count=ooms,
            fragmentation=(1.0 - allocated / reserved) if reserved > 0 else 0.0)
        return reading

    def exact_peaks(self):
        stats = self._stats()
        return stats[5], stats[6]
