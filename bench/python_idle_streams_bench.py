#!/usr/bin/python3
"""python_idle_streams_bench: what Get streams a Python client never reads cost.

A real weightd (build/api/weightd, or $WEIGHTD_BIN) serves one object of
--object-mib MiB; a Python gRPC client (whose transport takes far more per
stream than weightd's own C++ client, see bench/stream_bench) opens --streams
Get streams on it, takes each one's first message and never reads on. Printed:
the daemon's RSS idle (after one full read) and with the streams open, as a
ratio to idle, for each --get-buffer given. Prints figures; asserts nothing.

    bench/python_idle_streams_bench.py [--streams 300] [--object-mib 16]
                                       [--get-buffer 1MiB --get-buffer 16MiB ...]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))

import grpc  # noqa: E402
from weightd._proto import weightd_pb2 as pb, weightd_pb2_grpc as rpc  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def measure(binary: str, streams: int, object_mib: int, get_buffer: str | None) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        flags = [binary, "--data-dir", f"{tmp}/var", "--hot-dir", f"{tmp}/hot",
                 "--listen", f"127.0.0.1:{port}", "--http-listen", f"127.0.0.1:{free_port()}",
                 "--max-streams-per-connection", str(streams + 8), "--log-level", "warn"]
        if get_buffer:
            flags += ["--get-buffer", get_buffer]
        daemon = subprocess.Popen(flags)
        try:
            channel = grpc.insecure_channel(f"127.0.0.1:{port}")
            grpc.channel_ready_future(channel).result(timeout=10)
            objects = rpc.ObjectServiceStub(channel)
            data = os.urandom(object_mib << 20)

            def requests():
                yield pb.PutRequest(header=pb.PutHeader(key="big", size=len(data)))
                for at in range(0, len(data), 4 << 20):
                    yield pb.PutRequest(chunk=data[at:at + (4 << 20)])

            objects.Put(requests(), timeout=60)
            for _ in objects.Get(pb.GetRequest(key="big"), timeout=60):
                pass
            idle = rss_mib(daemon.pid)
            opened = [objects.Get(pb.GetRequest(key="big")) for _ in range(streams)]
            for stream in opened:
                next(stream)  # its first message: the stream is open
            time.sleep(3)  # each sends what its client's window takes
            held = rss_mib(daemon.pid)
            for stream in opened:
                stream.cancel()
            return idle, held
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=300)
    parser.add_argument("--object-mib", type=int, default=16)
    parser.add_argument("--get-buffer", action="append",
                        help="a --get-buffer to measure (default: the daemon's own)")
    args = parser.parse_args()
    binary = os.environ.get("WEIGHTD_BIN", os.path.join(ROOT, "build", "api", "weightd"))
    print(f"python_idle_streams_bench: {args.streams} unread Get streams of a "
          f"{args.object_mib} MiB object, Python client")
    for get_buffer in args.get_buffer or [None]:
        idle, held = measure(binary, args.streams, args.object_mib, get_buffer)
        name = get_buffer or "default"
        print(f"  --get-buffer {name:>8}: daemon RSS idle {idle:6.1f} MiB, streams open "
              f"{held:6.1f} MiB  {held / idle:4.2f}x idle")


if __name__ == "__main__":
    main()
