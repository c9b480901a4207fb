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

# The toolchain and the dependencies the build was pointed at (a compiler in /opt, the PyTorch
# wheel's LibTorch, a prefix of unpacked packages on a GPU host) are not the project's inputs:
# their installation roots are allowed. The project's own settings (VRAMLAB_*) never are.
TOOL_KEY = re.compile(r"^(CMAKE_(C|CXX|CUDA)_COMPILER|CMAKE_MAKE_PROGRAM|CMAKE_(CPACK_|CTEST_)?COMMAND|"
                      r"CMAKE_ROOT|CMAKE_PREFIX_PATH|CMAKE_(AR|RANLIB|NM|LINKER|OBJCOPY|OBJDUMP|STRIP|"
                      r"ADDR2LINE|READELF|DLLTOOL|C_COMPILER_AR|CXX_COMPILER_AR|C_COMPILER_RANLIB|"
                      r"CXX_COMPILER_RANLIB)|.*_DIR|.*_EXECUTABLE|.*_LIBRARY(_\w+)?|.*_INCLUDE_DIRS?)"
                      r"(:\w+)?$")
MARKERS = {"bin", "lib", "lib64", "share", "include"}

def installation_root(path):
    parts = path.rstrip("/").split("/")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] in MARKERS:
            return "/".join(parts[:i]) or "/"
    return os.path.dirname(path)

cache = os.path.join(build, "CMakeCache.txt")
entries = []
for number, line in enumerate(open(cache), 1):
    if line.startswith(("//", "#")) or "=" not in line:
        continue
    key, value = line.rstrip("\n").split("=", 1)
    entries.append((number, key, value))
    name = key.split(":")[0]
    if TOOL_KEY.match(name) and not name.startswith("VRAMLAB_"):
        for path in paths_in(value):
            root = installation_root(path)
            if root not in ("/", "") and not inside(src, root):
                allowed.append(root)
                allowed.append(os.path.realpath(root))

# The CMake cache: KEY:TYPE=VALUE lines; comments (// and #) describe, they are not read.
for number, key, value in entries:
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
