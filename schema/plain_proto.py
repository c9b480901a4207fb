#!/usr/bin/env python3
"""Generates plain C++ views of proto messages: structs, enum name tables, a canonical-JSON codec
and protobuf converters, so that code which links no Protobuf (the worker, common/) reads the same
schema as the daemon.

    plain_proto.py --proto-dir DIR --out DIR --name BASE --root vramlab.v1.ExperimentSpec ... FILE.proto...

writes, under --out, BASE.plain.h/.cc (structs and enum names: the standard library only),
BASE.plain_json.h/.cc (JSON codec: nlohmann-json and schema/json_object_reader.h) and
BASE.plain_proto.h/.cc (FromProto/ToProto: the protoc-generated classes). Only the messages and
enums reachable from the --root messages are generated.

The .proto files are read with a parser for the subset of proto3 this repository uses (messages,
nested messages and enums, scalar/enum/message fields, repeated, optional, oneof, map<string,
string>, options, reserved, services skipped). Anything else in a generated message is an error
naming the file and line, never a silent omission. tests/contract/schema_roundtrip_test.cc checks
the result against protobuf's own descriptors field by field.
"""

import argparse
import os
import re
import sys

SCALARS = {
    "int32": ("int32_t", "0"), "int64": ("int64_t", "0"), "uint32": ("uint32_t", "0"),
    "uint64": ("uint64_t", "0"), "double": ("double", "0"), "float": ("float", "0"),
    "bool": ("bool", "false"), "string": ("std::string", None), "bytes": ("std::string", None),
}


class ProtoError(Exception):
    pass


class Field:
    def __init__(self, name, type_name, number, label, line, oneof=None, map_types=None):
        self.name, self.type_name, self.number, self.label = name, type_name, number, label
        self.line, self.oneof, self.map_types = line, oneof, map_types
        self.resolved = None  # Message or Enum for non-scalar types

    @property
    def repeated(self):
        return self.label == "repeated"

    @property
    def has_presence(self):
        # proto3: explicit `optional`, oneof members and singular message fields track presence.
        if self.repeated or self.map_types:
            return False
        return self.label == "optional" or self.oneof is not None or isinstance(self.resolved, Message)


class Message:
    def __init__(self, full_name, file, line):
        self.full_name, self.file, self.line = full_name, file, line
        self.fields = []


class Enum:
    def __init__(self, full_name, file, line):
        self.full_name, self.file, self.line = full_name, file, line
        self.values = []  # (name, number)


TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|[A-Za-z_][A-Za-z0-9_.]*|-?\d+|[{}\[\]<>;=,()]',
                   re.S)


def tokenize(text, path):
    tokens, pos, line = [], 0, 1
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise ProtoError(f"{path}:{line}: unexpected character {text[pos]!r}")
        tok = m.group(0)
        if not (tok.isspace() or tok.startswith("//") or tok.startswith("/*")):
            tokens.append((tok, line))
        line += tok.count("\n")
        pos = m.end()
    return tokens


class Parser:
    def __init__(self, path, text):
        self.path, self.tokens, self.i = path, tokenize(text, path), 0
        self.package = ""
        self.messages, self.enums = {}, {}

    def peek(self):
        return self.tokens[self.i][0] if self.i < len(self.tokens) else None

    def line(self):
        return self.tokens[min(self.i, len(self.tokens) - 1)][1]

    def fail(self, what):
        raise ProtoError(f"{self.path}:{self.line()}: {what}")

    def take(self, expected=None):
        if self.i >= len(self.tokens):
            self.fail("unexpected end of file")
        tok = self.tokens[self.i][0]
        if expected is not None and tok != expected:
            self.fail(f"expected {expected!r}, got {tok!r}")
        self.i += 1
        return tok

    def skip_statement(self):
        depth = 0
        while True:
            tok = self.take()
            if tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth == 0:
                    return
            elif tok == ";" and depth == 0:
                return

    def parse(self):
        while self.peek() is not None:
            tok = self.peek()
            if tok == "package":
                self.take()
                self.package = self.take()
                self.take(";")
            elif tok in ("syntax", "import", "option"):
                self.skip_statement()
            elif tok == "message":
                self.parse_message(self.package)
            elif tok == "enum":
                self.parse_enum(self.package)
            elif tok == "service":
                self.skip_statement()
            else:
                self.fail(f"unexpected {tok!r} at file level")
        return self

    def parse_enum(self, scope):
        line = self.line()
        self.take("enum")
        enum = Enum(f"{scope}.{self.take()}", self.path, line)
        self.take("{")
        while self.peek() != "}":
            if self.peek() in ("option", "reserved"):
                self.skip_statement()
                continue
            name = self.take()
            self.take("=")
            number = int(self.take())
            if self.peek() == "[":
                while self.take() != "]":
                    pass
            self.take(";")
            enum.values.append((name, number))
        self.take("}")
        self.enums[enum.full_name] = enum

    def parse_field(self, message, oneof=None):
        line, label, map_types = self.line(), None, None
        if self.peek() in ("repeated", "optional"):
            label = self.take()
        type_name = self.take()
        if type_name == "map":
            self.take("<")
            key = self.take()
            self.take(",")
            value = self.take()
            self.take(">")
            map_types = (key, value)
        name = self.take()
        self.take("=")
        number = int(self.take())
        if self.peek() == "[":
            while self.take() != "]":
                pass
        self.take(";")
        message.fields.append(Field(name, type_name, number, label, line, oneof, map_types))

    def parse_message(self, scope):
        line = self.line()
        self.take("message")
        message = Message(f"{scope}.{self.take()}", self.path, line)
        self.take("{")
        while self.peek() != "}":
            tok = self.peek()
            if tok == "message":
                self.parse_message(message.full_name)
            elif tok == "enum":
                self.parse_enum(message.full_name)
            elif tok in ("option", "reserved", "extensions"):
                self.skip_statement()
            elif tok == "oneof":
                self.take()
                group = self.take()
                self.take("{")
                while self.peek() != "}":
                    if self.peek() == "option":
                        self.skip_statement()
                    else:
                        self.parse_field(message, oneof=group)
                self.take("}")
            else:
                self.parse_field(message)
        self.take("}")
        self.messages[message.full_name] = message


def resolve(name, scope, types):
    """Protobuf's scoping: the innermost enclosing scope that defines `name` wins."""
    if name.startswith("."):
        return types.get(name[1:])
    parts = scope.split(".")
    while parts:
        candidate = ".".join(parts + [name])
        if candidate in types:
            return types[candidate]
        parts.pop()
    return types.get(name)


def cpp_name(full_name, package):
    rest = full_name[len(package) + 1:] if full_name.startswith(package + ".") else full_name
    return rest.replace(".", "_")


def camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def enumerator(name, number):
    if number == 0 and name.endswith("UNSPECIFIED"):
        return "kUnspecified"
    return "k" + "".join(p[:1].upper() + p[1:].lower() for p in name.split("_") if p)


class Schema:
    def __init__(self, parsers, roots):
        self.package = parsers[0].package
        self.types = {}
        for p in parsers:
            self.types.update(p.messages)
            self.types.update(p.enums)
        self.messages, self.enums = [], []
        seen = set()

        def visit(t, via):
            if t.full_name in seen:
                return
            seen.add(t.full_name)
            if isinstance(t, Enum):
                self.enums.append(t)
                return
            for f in t.fields:
                if f.map_types:
                    if f.map_types != ("string", "string"):
                        raise ProtoError(f"{t.file}:{f.line}: only map<string, string> is supported")
                    continue
                if f.type_name in SCALARS:
                    continue
                scope = t.full_name
                f.resolved = resolve(f.type_name, scope, self.types)
                if f.resolved is None:
                    raise ProtoError(f"{t.file}:{f.line}: type {f.type_name} of {t.full_name}.{f.name} "
                                     "is not defined in the files given")
                visit(f.resolved, t)
            self.messages.append(t)  # after its fields' messages: a valid declaration order

        for root in roots:
            t = self.types.get(root)
            if not isinstance(t, Message):
                raise ProtoError(f"root {root} is not a message of the files given")
            visit(t, None)

    def name(self, t):
        return cpp_name(t.full_name, self.package)

    def value_type(self, f):
        if f.map_types:
            return "std::map<std::string, std::string>"
        base = SCALARS[f.type_name][0] if f.type_name in SCALARS else self.name(f.resolved)
        return f"std::vector<{base}>" if f.repeated else base

    def default(self, f):
        if f.repeated or f.map_types:
            return None
        if f.type_name in SCALARS:
            return SCALARS[f.type_name][1]
        if isinstance(f.resolved, Enum):
            return f"static_cast<{self.name(f.resolved)}>(0)"
        return None


def namespace_open(ns):
    return f"namespace {ns} {{\n"


def generate_header(s, base, ns, source_names):
    guard = re.sub(r"[^A-Z0-9]", "_", f"VRAMLAB_SCHEMA_{base}_PLAIN_H_".upper())
    out = [f"// Generated by schema/plain_proto.py from {', '.join(source_names)}. Do not edit.\n",
           "// Plain structs of the proto messages (proto3 defaults: zero, empty, first enumerator);\n",
           "// `has_x` records presence for optional, oneof and message fields.\n",
           f"#ifndef {guard}\n#define {guard}\n\n",
           "#include <cstdint>\n#include <map>\n#include <string>\n#include <string_view>\n#include <vector>\n\n",
           namespace_open(ns), "\n"]
    for e in s.enums:
        n = s.name(e)
        out.append(f"enum class {n} : int32_t {{\n")
        for name, number in e.values:
            out.append(f"  {enumerator(name, number)} = {number},  // {name}\n")
        out.append("};\n")
        out.append(f"// The proto name of `value` (\"{e.values[-1][0]}\"); nullptr for a number that names none.\n")
        out.append(f"const char* EnumName({n} value);\n")
        out.append(f"// The enumerator named `name` (proto spelling); false when none is.\n")
        out.append(f"bool EnumFromName(std::string_view name, {n}* value);\n")
        out.append(f"bool EnumIsValid({n} value);\n\n")
    for m in s.messages:
        n = s.name(m)
        out.append(f"struct {n} {{\n")
        for f in m.fields:
            d = s.default(f)
            out.append(f"  {s.value_type(f)} {f.name}" + (f" = {d};" if d else ";") + "\n")
            if f.has_presence:
                out.append(f"  bool has_{f.name} = false;\n")
        out.append(f"\n  bool operator==(const {n}& other) const;\n")
        out.append(f"  bool operator!=(const {n}& other) const {{ return !(*this == other); }}\n")
        out.append("};\n\n")
    out.append(f"}}  // namespace {ns}\n\n#endif  // {guard}\n")
    return "".join(out)


def generate_source(s, base, ns):
    out = [f"// Generated by schema/plain_proto.py. Do not edit.\n",
           f'#include "{base}.plain.h"\n\n', namespace_open(ns), "\n"]
    for e in s.enums:
        n = s.name(e)
        out.append(f"const char* EnumName({n} value) {{\n  switch (static_cast<int32_t>(value)) {{\n")
        for name, number in e.values:
            out.append(f'    case {number}: return "{name}";\n')
        out.append("    default: return nullptr;\n  }\n}\n\n")
        out.append(f"bool EnumFromName(std::string_view name, {n}* value) {{\n")
        for name, number in e.values:
            out.append(f'  if (name == "{name}") {{ *value = static_cast<{n}>({number}); return true; }}\n')
        out.append("  return false;\n}\n\n")
        out.append(f"bool EnumIsValid({n} value) {{ return EnumName(value) != nullptr; }}\n\n")
    for m in s.messages:
        n = s.name(m)
        terms = []
        for f in m.fields:
            terms.append(f"{f.name} == other.{f.name}")
            if f.has_presence:
                terms.append(f"has_{f.name} == other.has_{f.name}")
        body = " &&\n         ".join(terms) if terms else "true"
        out.append(f"bool {n}::operator==(const {n}& other) const {{\n  return {body};\n}}\n\n")
    out.append(f"}}  // namespace {ns}\n")
    return "".join(out)


JSON_READERS = {"int32": "Int32", "int64": "Int64", "uint32": "UInt32", "uint64": "UInt64",
                "double": "Double", "float": "Double", "bool": "Bool", "string": "String", "bytes": "String"}


def generate_json(s, base, ns):
    h = [f"// Generated by schema/plain_proto.py. Do not edit.\n",
         "// Canonical proto JSON for the plain structs of this schema.\n",
         f"#ifndef VRAMLAB_SCHEMA_{base.upper()}_PLAIN_JSON_H_\n#define VRAMLAB_SCHEMA_{base.upper()}_PLAIN_JSON_H_\n\n",
         "#include <string>\n\n#include <nlohmann/json.hpp>\n\n", f'#include "{base}.plain.h"\n\n',
         namespace_open(ns), "\n"]
    c = [f"// Generated by schema/plain_proto.py. Do not edit.\n", f'#include "{base}.plain_json.h"\n\n',
         "#include <cmath>\n\n", '#include "schema/json_object_reader.h"\n\n', namespace_open(ns),
         "namespace {\n\nusing schema::JsonObjectReader;\n\n"]
    for e in s.enums:
        c.append(f"const schema::EnumNames k{s.name(e)}Names = {{")
        c.append(", ".join(f'{{"{name}", {number}}}' for name, number in e.values))
        c.append("};\n")
    c.append("\nnlohmann::json WriteInt64(int64_t v) { return std::to_string(v); }\n")
    c.append("nlohmann::json WriteInt64(uint64_t v) { return std::to_string(v); }\n")
    c.append("nlohmann::json WriteDouble(double v) {\n"
             "  if (std::isnan(v)) return \"NaN\";\n"
             "  if (std::isinf(v)) return v > 0 ? \"Infinity\" : \"-Infinity\";\n  return v;\n}\n")
    c.append("template <typename E>\nnlohmann::json WriteEnum(E v) {\n"
             "  const char* name = EnumName(v);\n"
             "  return name != nullptr ? nlohmann::json(name) : nlohmann::json(static_cast<int32_t>(v));\n}\n\n")
    c.append("}  // namespace\n\n")
    for m in s.messages:
        n = s.name(m)
        h.append(f"// Reads `json` (lowerCamelCase or snake_case keys, null as the default, int64 as string or\n"
                 f"// number, enums by name or number) into `out`; `path` names the object in errors. A key that\n"
                 f"// names no field is an error. Throws schema::JsonFieldError.\n")
        h.append(f"void ReadJson(const nlohmann::json& json, const std::string& path, {n}* out);\n")
        h.append(f"// Every field without presence (scalars, enums, repeated, maps), zero or empty included, as\n"
                 f"// protobuf's printer with always_print_fields_with_no_presence writes them; a field with\n"
                 f"// presence (optional, oneof, message) when has_x, zero included. Keys are lowerCamelCase in\n"
                 f"// nlohmann-json's object order (sorted), doubles in its shortest round-trip form.\n")
        h.append(f"nlohmann::json ToJson(const {n}& in);\n\n")
        names = ", ".join(f'"{f.name}"' for f in m.fields)
        c.append(f"void ReadJson(const nlohmann::json& json, const std::string& path, {n}* out) {{\n")
        c.append(f"  JsonObjectReader r(json, path, {{{names}}});\n")
        for f in m.fields:
            fn = f.name
            if f.has_presence:
                c.append(f'  out->has_{fn} = r.Has("{fn}");\n')
            if f.map_types:
                c.append(f'  out->{fn} = r.StringMap("{fn}");\n')
            elif isinstance(f.resolved, Message):
                t = s.name(f.resolved)
                if f.repeated:
                    c.append(f'  out->{fn}.clear();\n')
                    c.append(f'  for (size_t i = 0; i < r.ArraySize("{fn}"); ++i) {{\n')
                    c.append(f'    out->{fn}.emplace_back();\n')
                    c.append(f'    ReadJson(r.Element("{fn}", i), r.PathOf("{fn}") + "[" + std::to_string(i) + "]", '
                             f'&out->{fn}.back());\n  }}\n')
                else:
                    c.append(f'  ReadJson(r.Object("{fn}"), r.PathOf("{fn}"), &out->{fn});\n')
            elif isinstance(f.resolved, Enum):
                t = s.name(f.resolved)
                if f.repeated:
                    c.append(f'  out->{fn}.clear();\n')
                    c.append(f'  for (int v : r.RepeatedEnum("{fn}", k{t}Names)) out->{fn}.push_back(static_cast<{t}>(v));\n')
                else:
                    c.append(f'  out->{fn} = static_cast<{t}>(r.Enum("{fn}", k{t}Names));\n')
            else:
                reader = JSON_READERS[f.type_name]
                if f.repeated:
                    c.append(f'  out->{fn} = r.Repeated{reader}("{fn}");\n')
                elif f.type_name == "float":
                    c.append(f'  out->{fn} = static_cast<float>(r.Double("{fn}"));\n')
                else:
                    c.append(f'  out->{fn} = r.{reader}("{fn}");\n')
        c.append("}\n\n")
        c.append(f"nlohmann::json ToJson(const {n}& in) {{\n  nlohmann::json j = nlohmann::json::object();\n")
        for f in m.fields:
            fn, key = f.name, camel(f.name)
            if f.map_types:
                value = f"nlohmann::json(in.{fn})"
            elif f.repeated:
                if isinstance(f.resolved, Message):
                    elem = "ToJson(v)"
                elif isinstance(f.resolved, Enum):
                    elem = "WriteEnum(v)"
                elif f.type_name in ("int64", "uint64"):
                    elem = "WriteInt64(v)"
                elif f.type_name in ("double", "float"):
                    elem = "WriteDouble(v)"
                else:
                    elem = "nlohmann::json(v)"
                c.append(f'  {{\n    nlohmann::json a = nlohmann::json::array();\n'
                         f'    for (const auto& v : in.{fn}) a.push_back({elem});\n    j["{key}"] = a;\n  }}\n')
                continue
            elif isinstance(f.resolved, Message):
                value = f"ToJson(in.{fn})"
            elif isinstance(f.resolved, Enum):
                value = f"WriteEnum(in.{fn})"
            elif f.type_name in ("int64", "uint64"):
                value = f"WriteInt64(in.{fn})"
            elif f.type_name in ("double", "float"):
                value = f"WriteDouble(in.{fn})"
            else:
                value = f"in.{fn}"
            if f.has_presence:
                c.append(f'  if (in.has_{fn}) j["{key}"] = {value};\n')
            else:
                c.append(f'  j["{key}"] = {value};\n')
        c.append("  return j;\n}\n\n")
    h.append(f"}}  // namespace {ns}\n\n#endif\n")
    c.append(f"}}  // namespace {ns}\n")
    return "".join(h), "".join(c)


def generate_proto(s, base, ns, pb_headers, pb_ns):
    h = [f"// Generated by schema/plain_proto.py. Do not edit.\n",
         "// Conversions between the protoc-generated classes and the plain structs.\n",
         f"#ifndef VRAMLAB_SCHEMA_{base.upper()}_PLAIN_PROTO_H_\n#define VRAMLAB_SCHEMA_{base.upper()}_PLAIN_PROTO_H_\n\n",
         f'#include "{base}.plain.h"\n'] + [f'#include "{p}"\n' for p in pb_headers] + ["\n", namespace_open(ns), "\n"]
    c = [f"// Generated by schema/plain_proto.py. Do not edit.\n", f'#include "{base}.plain_proto.h"\n\n',
         namespace_open(ns), "\n"]
    for m in s.messages:
        n = s.name(m)
        pn = f"{pb_ns}::{n}"
        h.append(f"{n} FromProto(const {pn}& in);\nvoid ToProto(const {n}& in, {pn}* out);\n\n")
        c.append(f"{n} FromProto(const {pn}& in) {{\n  {n} out;\n")
        for f in m.fields:
            fn = f.name
            if f.has_presence:
                c.append(f"  out.has_{fn} = in.has_{fn}();\n")
            if f.map_types:
                c.append(f"  for (const auto& [k, v] : in.{fn}()) out.{fn}[k] = v;\n")
            elif f.repeated:
                if isinstance(f.resolved, Message):
                    c.append(f"  for (const auto& v : in.{fn}()) out.{fn}.push_back(FromProto(v));\n")
                elif isinstance(f.resolved, Enum):
                    t = s.name(f.resolved)
                    c.append(f"  for (int v : in.{fn}()) out.{fn}.push_back(static_cast<{t}>(v));\n")
                else:
                    c.append(f"  out.{fn}.assign(in.{fn}().begin(), in.{fn}().end());\n")
            elif isinstance(f.resolved, Message):
                c.append(f"  out.{fn} = FromProto(in.{fn}());\n")
            elif isinstance(f.resolved, Enum):
                c.append(f"  out.{fn} = static_cast<{s.name(f.resolved)}>(in.{fn}());\n")
            else:
                c.append(f"  out.{fn} = in.{fn}();\n")
        c.append("  return out;\n}\n\n")
        c.append(f"void ToProto(const {n}& in, {pn}* out) {{\n  out->Clear();\n")
        for f in m.fields:
            fn = f.name
            if f.map_types:
                c.append(f"  for (const auto& [k, v] : in.{fn}) (*out->mutable_{fn}())[k] = v;\n")
            elif f.repeated:
                if isinstance(f.resolved, Message):
                    c.append(f"  for (const auto& v : in.{fn}) ToProto(v, out->add_{fn}());\n")
                elif isinstance(f.resolved, Enum):
                    c.append(f"  for ({s.name(f.resolved)} v : in.{fn}) "
                             f"out->add_{fn}(static_cast<{pb_ns}::{s.name(f.resolved)}>(v));\n")
                else:
                    c.append(f"  for (const auto& v : in.{fn}) out->add_{fn}(v);\n")
            else:
                if isinstance(f.resolved, Message):
                    stmt = f"ToProto(in.{fn}, out->mutable_{fn}());"
                elif isinstance(f.resolved, Enum):
                    stmt = f"out->set_{fn}(static_cast<{pb_ns}::{s.name(f.resolved)}>(in.{fn}));"
                else:
                    stmt = f"out->set_{fn}(in.{fn});"
                if f.has_presence:
                    c.append(f"  if (in.has_{fn}) {stmt}\n")
                else:
                    c.append(f"  {stmt}\n")
        c.append("}\n\n")
    h.append(f"}}  // namespace {ns}\n\n#endif\n")
    c.append(f"}}  // namespace {ns}\n")
    return "".join(h), "".join(c)


def write_if_changed(path, text):
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True, help="base name of the generated files")
    ap.add_argument("--root", action="append", required=True, help="full name of a root message")
    ap.add_argument("--namespace", default="vramlab::plain")
    ap.add_argument("--proto-namespace", default="vramlab::v1")
    ap.add_argument("--pb-header", action="append", default=[], help="protoc header to include")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    try:
        parsers = []
        for path in args.files:
            with open(path) as f:
                parsers.append(Parser(path, f.read()).parse())
        schema = Schema(parsers, args.root)
    except ProtoError as e:
        print(f"plain_proto.py: {e}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    b = args.name
    sources = [os.path.basename(p) for p in args.files]
    write_if_changed(os.path.join(args.out, f"{b}.plain.h"), generate_header(schema, b, args.namespace, sources))
    write_if_changed(os.path.join(args.out, f"{b}.plain.cc"), generate_source(schema, b, args.namespace))
    jh, jc = generate_json(schema, b, args.namespace)
    write_if_changed(os.path.join(args.out, f"{b}.plain_json.h"), jh)
    write_if_changed(os.path.join(args.out, f"{b}.plain_json.cc"), jc)
    ph, pc = generate_proto(schema, b, args.namespace, args.pb_header, args.proto_namespace)
    write_if_changed(os.path.join(args.out, f"{b}.plain_proto.h"), ph)
    write_if_changed(os.path.join(args.out, f"{b}.plain_proto.cc"), pc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
