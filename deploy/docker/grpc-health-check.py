#!/usr/bin/python3
"""Asks a vramlabd's grpc.health.v1 service whether it is SERVING; exit 0 if so, 1 otherwise.

The container's HEALTHCHECK. It calls the standard health service, which the daemon serves without
authentication, so the probe needs no token (a token in a HEALTHCHECK would show in `docker
inspect`). The messages are encoded by hand to need only grpcio (Debian/Ubuntu python3-grpcio):
HealthCheckRequest{service: ""} is the empty message and HealthCheckResponse{status: SERVING} is
field 1 = 1, bytes 08 01.

usage: grpc-health-check.py [HOST:PORT] [--timeout SECONDS]   (default 127.0.0.1:7433, 3 s)
"""
import sys

import grpc

SERVING = b"\x08\x01"


def main(argv):
    address = "127.0.0.1:7433"
    timeout = 3.0
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--timeout" and args:
            timeout = float(args.pop(0))
        elif not arg.startswith("-"):
            address = arg
        else:
            print(f"grpc-health-check: unknown argument {arg}", file=sys.stderr)
            return 2
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        try:
            response = check(b"", timeout=timeout)
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
