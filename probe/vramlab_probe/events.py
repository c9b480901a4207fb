"""WorkerEvent lines in protobuf's canonical JSON (proto/vramlab/v1/memory.proto), as the LibTorch
worker writes them (worker/events/event_json.cc): lowerCamelCase names, int64 as strings, enums by
name. Each line is one os.write under a lock, so lines from the sampler thread and the training
thread never interleave."""
import json
import math
import os
import threading


def int64(value):
    return str(int(value))


def double(value):
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


class EventWriter:
    def __init__(self, fd):
        self._fd = fd
        self._lock = threading.Lock()
        self.broken = False

    def write(self, payload_name, payload):
        if self.broken:
            return
        line = json.dumps({payload_name: payload}, separators=(",", ":")) + "\n"
        data = line.encode("utf-8")
        with self._lock:
            try:
                while data:
                    written = os.write(self._fd, data)
                    data = data[written:]
            except OSError:
                # The daemon stopped reading (the run is over for it): the program goes on.
                self.broken = True


def sample_json(reading, phase, step, micro_step, time_seconds, categories=None):
    sample = {
        "timeSeconds": double(time_seconds),
        "allocatedBytes": int64(reading["allocated"]),
        "reservedBytes": int64(reading["reserved"]),
        "activeBytes": int64(reading["active"]),
        "inactiveSplitBytes": int64(reading["inactive_split"]),
        "requestedBytes": int64(reading["requested"]),
        "peakAllocatedBytes": int64(reading["peak_allocated"]),
        "peakReservedBytes": int64(reading["peak_reserved"]),
        "allocRetries": int64(reading["alloc_retries"]),
        "oomCount": int64(reading["oom_count"]),
        "deviceUsedBytes": int64(reading["device_used"]),
        "deviceTotalBytes": int64(reading["device_total"]),
        "fragmentationRatio": double(reading["fragmentation"]),
        "phase": phase,
        "step": int(step),
        "microStep": int(micro_step),
    }
    if categories is not None:
        sample["categories"] = categories_json(categories)
    return sample


def categories_json(categories):
    return {
        "weightsBytes": int64(categories.get("weights", 0)),
        "gradientsBytes": int64(categories.get("gradients", 0)),
        "optimizerStateBytes": int64(categories.get("optimizer_state", 0)),
        "activationsBytes": int64(categories.get("activations", 0)),
        "temporariesBytes": int64(categories.get("temporaries", 0)),
    }
