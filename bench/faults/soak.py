#!/usr/bin/env python3
"""Fault soak of vramlabd: kill -9 at random moments while clients submit and watch.

Each cycle starts the daemon (CPU device, --requeue-interrupted) on one data directory, lets
client threads submit tiny experiments and watch them through the vramlab CLI for a random
0.3-2 s, then kills the daemon with SIGKILL. As root, the data directory is a tmpfs and every
--disk-every'th cycle fills it to the last byte for a while (killing the daemon while full in
half of those cycles) before freeing it. After the cycles a last daemon drains the queue and the
script checks every experiment the daemon acknowledged (a submit that answered with an id):

  lost        acknowledged, but unknown to the daemon or known under another id     (must be 0)
  duplicated  one request id stored as more than one experiment                     (must be 0)
  stuck       not in a final state once the queue drained                           (must be 0)
  watch_hung  `vramlab watch` of a final experiment that did not end within 30 s    (must be 0)

Usage: bench/faults/soak.py [--cycles 100] [--bin-dir build/bin] [--json results.json]
Exit status 0 when all four counts are 0.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

FINAL = {"SUCCEEDED", "OOM", "FAILED", "CANCELLED", "INTERRUPTED"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, bin_dir, data_dir, port, log_dir):
        self.bin_dir, self.data_dir, self.port, self.log_dir = bin_dir, data_dir, port, log_dir
        self.proc = None
        self.starts = 0

    def start(self, timeout=30):
        self.starts += 1
        log = open(os.path.join(self.log_dir, f"vramlabd-{self.starts}.log"), "w")
        self.proc = subprocess.Popen(
            [os.path.join(self.bin_dir, "vramlabd"), f"--data-dir={self.data_dir}",
             f"--listen=127.0.0.1:{self.port}", "--device=cpu", "--cpu-slots=2",
             "--requeue-interrupted", "--shutdown-grace-period=1s",
             f"--worker-path={os.path.join(self.bin_dir, 'vramlab-worker')}"],
            stdout=log, stderr=log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vramlabd exited at start; see {log.name}")
            with open(log.name) as f:
                if "vramlabd: listening" in f.read():
                    return
            time.sleep(0.02)
        raise RuntimeError(f"vramlabd did not start; see {log.name}")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


class Disk:
    """The data directory; as root a tmpfs that can be filled and freed."""

    def __init__(self, root, use_tmpfs):
        self.path = os.path.join(root, "data")
        os.makedirs(self.path)
        self.tmpfs = use_tmpfs and os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256m,mode=0700", "tmpfs", self.path]).returncode == 0
        self.filler = os.path.join(self.path, "filler")

    def fill(self):
        chunk = b"x" * (1 << 20)
        with open(self.filler, "ab", buffering=0) as f:
            size = len(chunk)
            while size > 0:
                try:
                    f.write(chunk[:size])
                except OSError:
                    size //= 2

    def free(self):
        if os.path.exists(self.filler):
            os.remove(self.filler)

    def close(self):
        if self.tmpfs:
            subprocess.run(["umount", "-l", self.path])


class Clients:
    """Threads that submit (retrying one request id until acknowledged) and watch."""

    def __init__(self, cli, address, count, seed):
        self.cli, self.address = cli, address
        self.acked = {}  # request id -> experiment id
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i, random.Random(seed + i)))
                        for i in range(count)]

    def vramlab(self, command, *args, timeout=20):
        return subprocess.run([self.cli, command, f"--addr={self.address}", *args],
                              capture_output=True, text=True, timeout=timeout)

    def run(self, index, rng):
        serial = 0
        while not self.stop.is_set():
            serial += 1
            request_id = f"soak-{index}-{serial}"
            while not self.stop.is_set():
                try:
                    out = self.vramlab("submit", "--preset=tiny", "--seq-len=32", "--steps=1",
                                       "--micro-batch=1", f"--request-id={request_id}", "--json")
                except subprocess.TimeoutExpired:
                    continue
                if out.returncode == 0:
                    with self.lock:
                        self.acked[request_id] = json.loads(out.stdout)["id"]
                    break
                time.sleep(0.05)  # daemon down or disk full: retry the same request id
            if rng.random() < 0.3 and request_id in self.acked:
                try:  # a watch cut by a kill is fine; one that hangs is caught at the end
                    self.vramlab("watch", self.acked[request_id], timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            time.sleep(rng.uniform(0.05, 0.3))

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def list_all(clients):
    """Every experiment the daemon knows (ls pages through them all with --limit=0)."""
    out = clients.vramlab("ls", "--limit=0", "--json", timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"vramlab ls failed: {out.stderr}")
    return json.loads(out.stdout).get("experiments", [])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--bin-dir", default="build/bin")
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--disk-every", type=int, default=5,
                        help="fill the disk every Nth cycle (root only; 0: never)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    bin_dir = os.path.abspath(args.bin_dir)
    root = tempfile.mkdtemp(prefix="vramlab-soak-")
    disk = Disk(root, args.disk_every > 0)
    port = free_port()
    daemon = Daemon(bin_dir, disk.path, port, root)
    clients = Clients(os.path.join(bin_dir, "vramlab"), f"127.0.0.1:{port}", args.clients, args.seed)
    began = time.time()
    disk_cycles = killed_while_full = 0
    try:
        daemon.start()
        clients.start()
        for cycle in range(1, args.cycles + 1):
            if cycle > 1:
                daemon.start()
            time.sleep(rng.uniform(0.3, 2.0))
            if disk.tmpfs and args.disk_every and cycle % args.disk_every == 0:
                disk_cycles += 1
                disk.fill()
                time.sleep(rng.uniform(0.5, 1.5))
                if rng.random() < 0.5:
                    daemon.kill()
                    killed_while_full += 1
                disk.free()
                time.sleep(rng.uniform(0.0, 1.0))
            daemon.kill()
            print(f"cycle {cycle}/{args.cycles}: {len(clients.acked)} acknowledged", flush=True)
        daemon.start()
        clients.join()

        deadline = time.time() + 300
        while True:
            experiments = list_all(clients)
            if all(e["state"] in FINAL for e in experiments) or time.time() > deadline:
                break
            time.sleep(2)
        by_request = {}
        for e in experiments:
            by_request.setdefault(e.get("requestId", ""), []).append(e)
        lost = sum(1 for rid, eid in clients.acked.items()
                   if eid not in [e["id"] for e in by_request.get(rid, [])])
        duplicated = sum(len(found) - 1 for rid, found in by_request.items()
                         if rid and len(found) > 1)
        stuck = sum(1 for e in experiments if e["state"] not in FINAL)
        watch_hung = 0
        for eid in list(clients.acked.values())[:: max(1, len(clients.acked) // 50)]:
            try:
                clients.vramlab("watch", eid, timeout=30)
            except subprocess.TimeoutExpired:
                watch_hung += 1
        outcome = {}
        for e in experiments:
            outcome[e["state"]] = outcome.get(e["state"], 0) + 1
        results = {
            "cycles": args.cycles, "clients": args.clients, "seed": args.seed,
            "acknowledged": len(clients.acked), "listed": len(experiments),
            "lost": lost, "duplicated": duplicated, "stuck": stuck, "watch_hung": watch_hung,
            "final_states": outcome, "disk_full_cycles": disk_cycles,
            "killed_while_disk_full": killed_while_full,
            "disk": "tmpfs 256 MiB" if disk.tmpfs else "no disk filling (not root)",
            "seconds": round(time.time() - began, 1),
        }
        print(json.dumps(results, indent=2))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
        return 0 if lost == duplicated == stuck == watch_hung == 0 else 1
    finally:
        clients.stop.set()
        daemon.kill()
        disk.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
