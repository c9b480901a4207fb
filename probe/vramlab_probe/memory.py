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

    def __init__(self, torch):
        self.torch = torch
        self.device = torch.cuda.current_device()

    def device_name(self):
        return self.torch.cuda.get_device_name(self.device)

    def read(self):
        cuda = self.torch.cuda
        stats = cuda.memory_stats(self.device)
        free, total = cuda.mem_get_info(self.device)
        allocated = stats.get("allocated_bytes.all.current", 0)
        reserved = stats.get("reserved_bytes.all.current", 0)
        reading = _empty(total - free, total)
        reading.update(
            allocated=allocated, reserved=reserved,
            active=stats.get("active_bytes.all.current", 0),
            inactive_split=stats.get("inactive_split_bytes.all.current", 0),
            requested=stats.get("requested_bytes.all.current", 0),
            peak_allocated=stats.get("allocated_bytes.all.peak", 0),
            peak_reserved=stats.get("reserved_bytes.all.peak", 0),
            alloc_retries=stats.get("num_alloc_retries", 0),
            oom_count=stats.get("num_ooms", 0),
            fragmentation=(1.0 - allocated / reserved) if reserved > 0 else 0.0)
        return reading

    def exact_peaks(self):
        stats = self.torch.cuda.memory_stats(self.device)
        return stats.get("allocated_bytes.all.peak", 0), stats.get("reserved_bytes.all.peak", 0)
