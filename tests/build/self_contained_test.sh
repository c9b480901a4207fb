#!/bin/bash
# The configured build reads nothing outside the checkout: every absolute path in the CMake cache
# and in the compile commands (include directories, definitions such as VRAMLAB_TESTDATA_DIR,
# sources) is under the source directory, the build directory or a system location, and the
# reference checkpoints the tests read (VRAMLAB_TESTDATA_DIR) are inside the checkout. Paths are
# compared after resolving symlinks, so a checkout cloned into any folder passes.
set -euo pipefail
src=${VRAMLAB_SOURCE_DIR:?}
build=$(dirname "${VRAMLAB_BIN_DIR:?}")
# Debian's interpreter: the check needs nothing beyond the standard library.
/usr/bin/python3 - "$src" "$build" "${VRAMLAB_TESTDATA_DIR:?}" <<'PY'
import json, os, re, shlex, sys

src, build, testdata = (os.path.realpath(p) for p in sys.argv[1:4])
# System locations a build may read: the toolchain, installed packages and their headers,
# configuration, and the kernel's and temporary files.
system = ["/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/tmp", "/proc", "/dev"]
allowed = [src, build] + system

def inside(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")

def outside(path):
    real = os.path.realpath(path)
    return not any(inside(path, r) or inside(real, r) for r in allowed)

def paths_in(text):
    """Absolute paths in a cache value or a compiler argument (-I/usr/x, -DX="/y", a;b lists)."""
    for token in re.split(r"[\s;\"'=,:]+", text):
        token = re.sub(r"^-(isystem|iquote|idirafter|include|I|L)", "", token)
        if token.startswith("/") and not token.startswith("//"):
            yield token

problems = []

# The CMake cache: KEY:TYPE=VALUE lines; comments (// and #) describe, they are not read.
cache = os.path.join(build, "CMakeCache.txt")
for number, line in enumerate(open(cache), 1):
    if line.startswith(("//", "#")) or "=" not in line:
        continue
    key, value = line.rstrip("\n").split("=", 1)
    for path in paths_in(value):
        if outside(path):
            problems.append(f"CMakeCache.txt:{number}: {key} = {path}")

# The compile commands: every argument of every command, with -I/-isystem/-D values split out.
commands = json.load(open(os.path.join(build, "compile_commands.json")))
assert commands, "compile_commands.json is empty"
definitions = 0
for entry in commands:
    arguments = entry.get("arguments") or shlex.split(entry["command"])
    for argument in arguments + [entry["file"], entry["directory"]]:
        if argument.startswith("-D"):
            definitions += 1
        for path in paths_in(argument):
            if outside(path):
                problems.append(f"compile_commands.json: {entry['file']}: {argument}")

# The checkpoints and expected values the tests compare against.
if not inside(testdata, src):
    problems.append(f"VRAMLAB_TESTDATA_DIR = {testdata} is not inside the checkout {src}")
cached = re.search(r"^VRAMLAB_TESTDATA_DIR:\w+=(.*)$", open(cache).read(), re.M)
if cached is None:
    problems.append("VRAMLAB_TESTDATA_DIR is not in the CMake cache")
elif not inside(os.path.realpath(cached.group(1)), src):
    problems.append(f"cached VRAMLAB_TESTDATA_DIR = {cached.group(1)} is not inside the checkout")
if not os.path.isdir(testdata) or not os.listdir(testdata):
    problems.append(f"VRAMLAB_TESTDATA_DIR = {testdata} is missing or empty")

for p in sorted(set(problems)):
    print("outside the checkout:", p)
print(f"{len(commands)} compile commands ({definitions} definitions) and the CMake cache checked "
      f"against {src} and {build}")
sys.exit(1 if problems else 0)
PY
