#!/usr/bin/python3
"""Abuse soak of vramlabd: hostile requests and connection floods on both ports for minutes.

One daemon (CPU device, the real worker) holds one finished tiny experiment. For --minutes, client
threads keep sending what a signed-in user could send to stall or swell it:

  watch_overflow   WatchExperiment of the finished experiment from after_sequence 2^63-1
  huge_states      ListExperiments with a 1,000,000-value states filter
  huge_ids         GetExperiment / CancelExperiment with a 100 KB id
  malformed        random bytes to every method
  idle_grpc        300 TCP connections to the gRPC port that send nothing (renewed every 20 s)
  trickle_grpc     20 clients sending the HTTP/2 preface a byte every 100 ms, reconnecting
  idle_metrics     300 TCP connections to the metrics port that send nothing
  trickle_metrics  20 clients sending an HTTP request a byte every 100 ms, reconnecting

Meanwhile a prober measures, twice a second: `vramlab ls` (a whole CLI process), a ListExperiments
call, and a /metrics scrape; and the daemon's RSS and CPU time. At the end it checks that nothing
was lost (the experiment and each of its events are still there, a new submit runs) and that every
answer was a status a client can act on (no INTERNAL, no UNKNOWN).

Uses Debian's python3-grpcio with hand-encoded messages (no generated code), so it runs from a
build tree alone.

Usage: bench/faults/abuse_soak.py [--minutes 10] [--bin-dir build/bin] [--json results.json]
Exit status 0 when ls stayed under 1 s, scrapes under 1 s, nothing was lost and no answer was
INTERNAL or UNKNOWN.
"""
import argparse
import collections
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc

SERVICE = "/vramlab.v1.VramlabService/"
METHODS = ["SubmitExperiment", "GetExperiment", "ListExperiments", "CancelExperiment",
           "EstimateMemory", "GetServerInfo", "WatchExperiment", "GetExperimentLog",
           "GetMemorySnapshot"]
STREAMING = {"WatchExperiment", "GetExperimentLog", "GetMemorySnapshot"}


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_bytes(number, data):
    return varint(number << 3 | 2) + varint(len(data)) + data


def field_varint(number, value):
    return varint(number << 3) + varint(value)


class Daemon:
    def __init__(self, bin_dir, data_dir, log_path):
        self.bin_dir = bin_dir
        self.log = open(log_path, "w+")
        self.proc = subprocess.Popen(
            [os.path.join(bin_dir, "vramlabd"), "--listen=127.0.0.1:0", "--data-dir=" + data_dir,
             "--device=cpu", "--cpu-slots=1", "--metrics-listen=127.0.0.1:0",
             "--worker-path=" + os.path.join(bin_dir, "vramlab-worker")],
            stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 30
        while time.time() < deadline:
            self.log.seek(0)
            m = re.search(r"listening grpc=([\d.]+):(\d+) metrics=([\d.]+):(\d+)", self.log.read())
            if m:
                self.grpc_port, self.metrics_port = int(m.group(2)), int(m.group(4))
                self.addr = f"127.0.0.1:{self.grpc_port}"
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("vramlabd did not start")

    def cli(self, *args, timeout=60):
        return subprocess.run([os.path.join(self.bin_dir, "vramlab"), "--addr", self.addr, *args],
                              capture_output=True, text=True, timeout=timeout)

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


class Tally:
    """Status codes seen per kind of abuse, and the count of calls."""

    def __init__(self):
        self.lock = threading.Lock()
        self.codes = collections.defaultdict(collections.Counter)

    def add(self, kind, code):
        with self.lock:
            self.codes[kind][code] += 1


def call(channel, method, body, timeout):
    """The status code name of calling `method` with raw `body` ('OK' or the error's code)."""
    try:
        if method in STREAMING:
            stream = channel.unary_stream(SERVICE + method)(body, timeout=timeout)
            for _ in stream:
                pass
        else:
            channel.unary_unary(SERVICE + method)(body, timeout=timeout)
        return "OK"
    except grpc.RpcError as error:
        return error.code().name


def abuser(kind, daemon, finished_id, tally, stop):
    channel = grpc.insecure_channel(daemon.addr, options=[("grpc.max_send_message_length", 64 << 20)])
    states = field_bytes(3, b"\x04" * 1_000_000)
    while not stop.is_set():
        if kind == "watch_overflow":
            body = field_bytes(1, finished_id.encode()) + field_varint(2, 2**63 - 1)
            tally.add(kind, call(channel, "WatchExperiment", body, 10))
        elif kind == "huge_states":
            tally.add(kind, call(channel, "ListExperiments", states, 10))
        elif kind == "huge_ids":
            method = random.choice(["GetExperiment", "CancelExperiment"])
            tally.add(kind, call(channel, method, field_bytes(1, b"x" * 100_000), 10))
        elif kind == "malformed":
            body = bytes(random.getrandbits(8) for _ in range(random.randint(1, 64)))
            tally.add(kind, call(channel, random.choice(METHODS), body, 10))


def connect(port, source):
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def idle_holder(port, count, stop, prefix):
    held = []
    while not stop.is_set():
        for s in held:
            s.close()
        held = []
        for i in range(count):
            try:
                held.append(connect(port, f"{prefix}.{1 + i % 50}"))
            except OSError:
                pass
        stop.wait(20)
    for s in held:
        s.close()


def trickler(port, payload, stop, source, counter):
    while not stop.is_set():
        try:
            s = connect(port, source)
            for i in range(len(payload) - 1):
                if stop.is_set():
                    break
                s.send(payload[i:i + 1])
                time.sleep(0.1)
            s.close()
        except OSError:
            time.sleep(0.1)
        counter[0] += 1


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--bin-dir", default="build/bin")
    parser.add_argument("--json")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="vramlab-abuse-soak-")
    daemon = Daemon(args.bin_dir, os.path.join(work, "data"), os.path.join(work, "vramlabd.log"))
    submitted = daemon.cli("submit", "--preset", "tiny", "--steps", "1", "--seq-len", "32",
                           "--wait", "--json")
    finished_id = json.loads(submitted.stdout)["id"]
    events_before = daemon.cli("watch", finished_id, "--json").stdout.count("\n")

    stop = threading.Event()
    tally = Tally()
    threads = [threading.Thread(target=abuser, args=(kind, daemon, finished_id, tally, stop))
               for kind in ["watch_overflow"] * 8 + ["huge_states"] * 2 + ["huge_ids"] * 2 +
               ["malformed"] * 2]
    threads += [threading.Thread(target=idle_holder, args=(daemon.grpc_port, 300, stop, "127.0.2")),
                threading.Thread(target=idle_holder, args=(daemon.metrics_port, 300, stop, "127.0.3"))]
    reconnects = {"grpc": [0], "metrics": [0]}
    for t in range(20):
        threads.append(threading.Thread(target=trickler, args=(
            daemon.grpc_port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", stop, f"127.0.4.{1 + t}",
            reconnects["grpc"])))
        threads.append(threading.Thread(target=trickler, args=(
            daemon.metrics_port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", stop,
            f"127.0.5.{1 + t}", reconnects["metrics"])))
    for thread in threads:
        thread.daemon = True
        thread.start()

    probe_channel = grpc.insecure_channel(daemon.addr)
    samples = {"cli_ls_s": [], "rpc_ls_s": [], "scrape_s": [], "rss_mib": [], "cpu_cores": []}
    failures = collections.Counter()
    start = time.time()
    last_cpu, last_time = daemon.cpu_seconds(), start
    while time.time() - start < args.minutes * 60:
        t0 = time.time()
        ls = daemon.cli("ls", timeout=30)
        samples["cli_ls_s"].append(time.time() - t0)
        if ls.returncode != 0:
            failures["cli_ls"] += 1
        t0 = time.time()
        code = call(probe_channel, "ListExperiments", b"", 30)
        samples["rpc_ls_s"].append(time.time() - t0)
        if code != "OK":
            failures["rpc_ls"] += 1
        t0 = time.time()
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=30).read()
        except OSError:
            failures["scrape"] += 1
        samples["scrape_s"].append(time.time() - t0)
        now, cpu = time.time(), daemon.cpu_seconds()
        samples["rss_mib"].append(daemon.rss_bytes() / 2**20)
        samples["cpu_cores"].append((cpu - last_cpu) / (now - last_time))
        last_cpu, last_time = cpu, now
        time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join(30)

    events_after = daemon.cli("watch", finished_id, "--json").stdout.count("\n")
    again = daemon.cli("submit", "--preset", "tiny", "--steps", "1", "--seq-len", "32", "--wait")
    daemon.stop()
    shutil.rmtree(work, ignore_errors=True)

    codes = {kind: dict(counter) for kind, counter in tally.codes.items()}
    unclear = sum(n for counter in tally.codes.values() for code, n in counter.items()
                  if code in ("INTERNAL", "UNKNOWN"))
    summary = {
        "minutes": args.minutes,
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "calls": {kind: sum(counter.values()) for kind, counter in tally.codes.items()},
        "codes": codes,
        "reconnects": {k: v[0] for k, v in reconnects.items()},
        "probe_failures": dict(failures),
        "lost": int(events_after != events_before or again.returncode != 0),
        "unclear_answers": unclear,
    }
    for name, values in samples.items():
        summary[name] = {"n": len(values), "p50": percentile(values, 50),
                         "p95": percentile(values, 95), "max": max(values) if values else 0}
    summary["rss_mib"]["first"] = samples["rss_mib"][0] if samples["rss_mib"] else 0
    summary["rss_mib"]["last"] = samples["rss_mib"][-1] if samples["rss_mib"] else 0
    ok = (summary["cli_ls_s"]["max"] < 1 and summary["rpc_ls_s"]["max"] < 1 and
          summary["scrape_s"]["max"] < 1 and not failures and not summary["lost"] and not unclear)
    summary["passed"] = ok
    text = json.dumps(summary, indent=2, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
