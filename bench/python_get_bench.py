#!/usr/bin/python3
"""python_get_bench: the Python package's read path against numpy on the same file.

A real weightd (build/api/weightd, or $WEIGHTD_BIN) with its HOT tier on
/dev/shm; a safetensors file of --mib MiB (--tensors tensors, float32 and
bf16-like uint16 in turn) written to /dev/shm and published with
weight_put (policy HOT). Then, --repeat times each, the best counts:

  - weightd: `with weight_get(id) as rev: rev.open_safetensors(...)` (lease,
    OpenLocal, replica files mapped; a tensor that crosses a 64 MiB payload
    boundary is copied), touching every byte;
  - numpy memmap: np.memmap views of the same /dev/shm file at the header's
    offsets (zero-copy), touching every byte the same way;
  - numpy fromfile: np.fromfile of each tensor (a read into memory), same.

"Touching" is np.bitwise_xor.reduce over the tensor viewed as uint64; the
three results must agree. Printed: MiB/s of each and the ratios weightd /
baseline. Prints figures; asserts nothing.

    bench/python_get_bench.py [--mib 1024] [--tensors 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[1]
BUILD_DIR = Path(os.environ.get("WEIGHTD_BUILD_DIR", SOURCE_DIR / "build"))
sys.path.insert(0, str(BUILD_DIR / "python"))  # the package with its generated stubs

import numpy as np  # noqa: E402

import weightd  # noqa: E402
from weightd import transfer  # noqa: E402

WEIGHTD_BIN = os.environ.get("WEIGHTD_BIN", str(BUILD_DIR / "api" / "weightd"))
MiB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(root: Path, hot_bytes: int) -> "tuple[subprocess.Popen, str]":
    """weightd with data under root/data and its HOT tier in root/hot; waits until it answers."""
    address = f"127.0.0.1:{free_port()}"
    args = [WEIGHTD_BIN, "--data-dir", str(root / "data"), "--hot-dir", str(root / "hot"),
            "--listen", address, "--http-listen", f"127.0.0.1:{free_port()}",
            "--log-level", "warn", "--scrub-rate", "0", "--hot-capacity", f"{hot_bytes // MiB}MiB"]
    log = open(root / "weightd.log", "ab")
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + 10
    while True:
        if process.poll() is not None:
            raise SystemExit(f"weightd exited with {process.returncode}:\n"
                             + (root / "weightd.log").read_text(errors="replace"))
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            with weightd.Client(address, timeout=2.0, attempts=1) as probe:
                probe.status()
            return process, address
        except (OSError, weightd.Unavailable):
            if time.monotonic() > deadline:
                process.kill()
                raise SystemExit("weightd did not answer within 10 s")
            time.sleep(0.02)


def stop_daemon(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def write_safetensors(path: Path, total_bytes: int, tensors: int) -> dict:
    """`tensors` tensors of total_bytes / tensors each (F32 and BF16 in turn), streamed to
    `path` one at a time; returns the header."""
    each = total_bytes // tensors // 8 * 8
    header, offset, dtypes = {}, 0, []
    for i in range(tensors):
        dtype, item = ("F32", 4) if i % 2 == 0 else ("BF16", 2)
        header[f"layer.{i}.weight"] = {"dtype": dtype, "shape": [each // item // 1024, 1024]
                                       if each // item % 1024 == 0 else [each // item],
                                       "data_offsets": [offset, offset + each]}
        dtypes.append(np.float32 if item == 4 else np.uint16)
        offset += each
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # 8-aligned data, as the reference writer pads it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for i, dtype in enumerate(dtypes):
            n = each // np.dtype(dtype).itemsize
            if dtype is np.float32:
                arr = (np.arange(n, dtype=np.float32) * np.float32(1e-6)) + np.float32(i)
            else:
                arr = (np.arange(n, dtype=np.uint32) * 2654435761 >> 16).astype(np.uint16)
            arr.tofile(f)
            del arr
    return header


def touch(arr: np.ndarray) -> int:
    """Reads every byte: the XOR of the tensor's bytes as uint64 words."""
    return int(np.bitwise_xor.reduce(arr.reshape(-1).view(np.uint64)))


def data_start(path: Path) -> int:
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
    return 8 + length


def via_weightd(rid: str, client: weightd.Client, name: str) -> int:
    acc = 0
    with weightd.weight_get(rid, client=client) as rev:
        for arr in rev.open_safetensors(name).values():
            acc ^= touch(arr)
    return acc


def via_memmap(path: Path, header: dict) -> int:
    start, acc = data_start(path), 0
    for entry in header.values():
        begin, end = entry["data_offsets"]
        arr = np.memmap(path, dtype=np.uint8, mode="r", offset=start + begin, shape=(end - begin,))
        acc ^= touch(arr)
        del arr
    return acc


def via_fromfile(path: Path, header: dict) -> int:
    start, acc = data_start(path), 0
    for entry in header.values():
        begin, end = entry["data_offsets"]
        arr = np.fromfile(path, dtype=np.uint8, count=end - begin, offset=start + begin)
        acc ^= touch(arr)
        del arr
    return acc


def best_seconds(work, repeat: int) -> "tuple[float, int]":
    best, result = float("inf"), None
    for _ in range(repeat):
        began = time.perf_counter()
        got = work()
        best = min(best, time.perf_counter() - began)
        if result is not None and got != result:
            raise SystemExit("the same bytes gave two different checksums")
        result = got
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="size of the safetensors file")
    parser.add_argument("--tensors", type=int, default=8, help="tensors in it")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the best counts)")
    args = parser.parse_args()
    if args.mib < 1 or args.tensors < 1 or args.repeat < 1:
        parser.error("--mib, --tensors and --repeat are at least 1")

    root = Path(tempfile.mkdtemp(prefix="weightd-python-get-bench-", dir="/dev/shm"))
    process = None
    try:
        model = root / "model"
        model.mkdir()
        name = "model.safetensors"
        path = model / name
        header = write_safetensors(path, args.mib * MiB, args.tensors)
        size = path.stat().st_size
        process, address = start_daemon(root, 3 * size + 512 * MiB)
        client = weightd.Client(address, timeout=120.0)
        view = weightd.weight_put(model, "default/python-get-bench@main", policy="HOT",
                                  client=client)
        rid = weightd.ids.format_id(view.id)

        with weightd.weight_get(rid, client=client) as rev:
            local = len(rev.local_files())
        start = data_start(path)
        crossing = sum(1 for e in header.values()
                       if (start + e["data_offsets"][0]) // transfer.PAYLOAD_BYTES
                       != (start + e["data_offsets"][1] - 1) // transfer.PAYLOAD_BYTES)

        # One untimed pass of each first (the file's and the replicas' pages in memory).
        base_xor = via_memmap(path, header)
        if via_weightd(rid, client, name) != base_xor or via_fromfile(path, header) != base_xor:
            raise SystemExit("weightd and numpy read different bytes")
        t_memmap, _ = best_seconds(lambda: via_memmap(path, header), args.repeat)
        t_fromfile, _ = best_seconds(lambda: via_fromfile(path, header), args.repeat)
        t_weightd, _ = best_seconds(lambda: via_weightd(rid, client, name), args.repeat)

        rate = lambda seconds: size / MiB / seconds  # noqa: E731
        print(f"python_get_bench: a {size / MiB:.0f} MiB safetensors file of {args.tensors} "
              f"tensors on /dev/shm, {local} payloads mapped locally, {crossing} tensors cross "
              f"a {transfer.PAYLOAD_BYTES // MiB} MiB payload boundary (copied); "
              f"best of {args.repeat}, every byte XORed")
        print(f"  {'numpy memmap of the file':40s} {rate(t_memmap):9.0f} MiB/s")
        print(f"  {'numpy fromfile of the file':40s} {rate(t_fromfile):9.0f} MiB/s")
        print(f"  {'weight_get + open_safetensors':40s} {rate(t_weightd):9.0f} MiB/s  "
              f"{t_memmap / t_weightd:.2f}x memmap, {t_fromfile / t_weightd:.2f}x fromfile")
        client.close()
    finally:
        if process is not None:
            stop_daemon(process)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
