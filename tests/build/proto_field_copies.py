#!/usr/bin/python3
"""Lists hand-written C++ structs and classes that copy a proto message's field list.

The proto is the only schema: the plain structs of a message are generated
(schema/plain_proto.py, in the build tree), so a struct in the source tree whose members are the
fields of a proto message (all of them, or all but one of a message of five or more) is a
hand-written copy that will drift. A struct that resolves or derives its own fields (a decoder's
features, a prediction's terms) shares some names and is not one.

Usage: proto_field_copies.py SOURCE_DIR; prints one line per copy ("path:line: struct Name copies
message Proto (k of n fields)") and exits 1 when it prints any.
"""
import os
import re
import sys

FIELD = re.compile(r"^\s*(?:optional\s+|repeated\s+)?[\w.]+(?:<[^>]*>)?\s+(\w+)\s*=\s*\d+\s*[;\[]")
MEMBER = re.compile(r"^\s*(?:(?:static|inline|constexpr|const|mutable)\s+)*"
                    r"[\w:]+(?:<[^;{}()]*>)?[\s*&]+(\w+)\s*(?:=[^;]*|\{[^;]*\})?;")
STRUCT = re.compile(r"^\s*(?:struct|class)\s+(\w+)[^;{]*\{")


def proto_messages(src):
    messages = {}
    folder = os.path.join(src, "proto")
    for root, _, files in os.walk(folder):
        for name in files:
            if not name.endswith(".proto"):
                continue
            stack = []  # (message name, fields, depth)
            depth = 0
            for line in open(os.path.join(root, name), encoding="utf-8"):
                line = line.split("//")[0]
                m = re.match(r"^\s*message\s+(\w+)\s*\{", line)
                if m:
                    stack.append((m.group(1), [], depth + 1))
                elif stack:
                    f = FIELD.match(line)
                    if f and depth == stack[-1][2]:
                        stack[-1][1].append(f.group(1))
                depth += line.count("{") - line.count("}")
                while stack and depth < stack[-1][2]:
                    message, fields, _ = stack.pop()
                    messages[message] = fields
    return messages


def cpp_structs(path):
    """(line number, name, member names) of each struct or class in a C++ file."""
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    found = []
    for i, line in enumerate(lines):
        m = STRUCT.match(line)
        if not m:
            continue
        depth = 0
        members = set()
        for body in lines[i:]:
            code = body.split("//")[0]
            if depth == 1:
                mm = MEMBER.match(code)
                if mm:
                    members.add(mm.group(1))
            depth += code.count("{") - code.count("}")
            if depth <= 0 and "{" in "".join(lines[i:i + 1]) and body is not lines[i]:
                break
        found.append((i + 1, m.group(1), members))
    return found


def main():
    src = sys.argv[1]
    messages = {name: set(fields) for name, fields in proto_messages(src).items() if len(fields) >= 3}
    copies = []
    for top in ("common", "server", "worker", "client", "schema", "probe", "kernels"):
        for root, _, files in os.walk(os.path.join(src, top)):
            for name in files:
                if not name.endswith((".h", ".cc")) or name.endswith("_test.cc"):
                    continue
                path = os.path.join(root, name)
                for line, struct, members in cpp_structs(path):
                    for message, fields in messages.items():
                        shared = len(fields & members)
                        if shared == len(fields) or (len(fields) >= 5 and shared >= len(fields) - 1):
                            copies.append(f"{os.path.relpath(path, src)}:{line}: struct {struct} "
                                          f"copies message {message} ({shared} of {len(fields)} fields)")
    for copy in copies:
        print(copy)
    return 1 if copies else 0


if __name__ == "__main__":
    sys.exit(main())
