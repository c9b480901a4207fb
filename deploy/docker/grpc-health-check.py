#!/usr/bin/python3
"""Asks a vramlabd's grpc.health.v1 service whether it is SERVING; exit 0 if so, 1 otherwise.

The container's HEALTHCHECK. It calls the standard health service, which the daemon serves without
authentication, so the probe needs no token (a token in a HEALTHCHECK would show in `docker
inspect`). The messages are encoded by hand to need only grpcio (Debian/Ubuntu python3-grpcio):
HealthCheckRequest{service: NAME} is field 1 as a length-delimited string (the empty message for
"", the whole server) and HealthCheckResponse{status: SERVING} is field 1 = 1, bytes 08 01.

usage: grpc-health-check.py [HOST:PORT] [--timeout SECONDS] [--service NAME]
       (default 127.0.0.1:7433, 3 s, service "")
"""
import sys

import grpc

SERVING = b"\x08\x01"


def health_check_request(service):
    name = service.encode()
    if not name:
        return b""
    if len(name) >= 128:
        raise ValueError("service name longer than 127 bytes")
    return b"\x0a" + bytes([len(name)]) + name


def main(argv):
    address = "127.0.0.1:7433"
    timeout = 3.0
    service = ""
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--timeout" and args:
            timeout = float(args.pop(0))
        elif arg == "--service" and args:
            service = args.pop(0)
        elif not arg.startswith("-"):
            address = arg
        else:
            print(f"grpc-health-check: unknown argument {arg}", file=sys.stderr)
            return 2
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        try:
            response = check(health_check_request(service), timeout=timeout)
        except grpc.RpcError as error:
            print(f"grpc-health-check: {address}: {error.code().name}: {error.details()}",
                  file=sys.stderr)
            return 1
    if response != SERVING:
        print(f"grpc-health-check: {address}: not serving ({response.hex()})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
