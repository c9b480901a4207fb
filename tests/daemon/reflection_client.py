#!/usr/bin/env python3
"""A server-reflection client over grpcio's raw stream API, for either reflection version.

usage: reflection_client.py HOST:PORT VERSION    (VERSION: v1 or v1alpha)

Sends, on one ServerReflectionInfo stream, list_services, then file_containing_symbol for every
listed service, then file_by_filename of a name no server has; prints one line per answer:
  service NAME
  file SYMBOL FILE_NAME...          (the files of the FileDescriptorResponse, in order)
  error REQUEST CODE MESSAGE
The messages are encoded and decoded here from their field numbers (both versions share them),
so the client depends on nothing but grpcio.
"""
import sys

import grpc


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number, payload):
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fields(data):
    """(number, value) of each field of a message; value is bytes or an int."""
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            length, i = read_varint(data, i)
            value, i = data[i:i + length], i + length
        else:
            raise ValueError("unexpected wire type %d" % wire)
        yield number, value


def read_varint(data, i):
    shift = value = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def file_name(descriptor):
    return next(v for n, v in fields(descriptor) if n == 1).decode()


def main(address, version):
    channel = grpc.insecure_channel(address)
    call = channel.stream_stream("/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % version)
    # list_services (7) first; its answer decides the symbol requests, so the stream is fed lazily.
    services = []
    answers = iter(call(iter_requests(services), timeout=10))
    first = next(answers)
    for number, value in fields(first):
        if number == 6:  # list_services_response
            for n, service in fields(value):
                if n == 1:
                    name = next(v for k, v in fields(service) if k == 1).decode()
                    services.append(name)
                    print("service", name)
    services.append(None)  # no more
    for answer in answers:
        original = dict(fields(next(v for n, v in fields(answer) if n == 2)))
        request = (original.get(4) or original.get(3) or b"").decode()
        for number, value in fields(answer):
            if number == 4:  # file_descriptor_response
                print("file", request, *[file_name(v) for n, v in fields(value) if n == 1])
            elif number == 7:  # error_response
                error = dict(fields(value))
                print("error", request, error.get(1, 0), error.get(2, b"").decode())


def iter_requests(services):
    yield field(7, b"*")
    while not services or services[-1] is not None:
        import time
        time.sleep(0.01)
    for name in services[:-1]:
        yield field(4, name.encode())
    yield field(3, b"no/such/file.proto")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("v1", "v1alpha"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        main(sys.argv[1], sys.argv[2])
    except grpc.RpcError as e:
        print("rpc", e.code().name, e.details())
        sys.exit(1)
