"""Fixtures of the Python client's tests: a real weightd on free loopback ports.

The binaries come from WEIGHTD_BIN and WEIGHTCTL_BIN (ctest sets both), by
default build/api/weightd and build/api/weightctl of this source tree. Each
daemon has its own data and HOT directories under pytest's tmp_path and is
stopped (SIGTERM, then SIGKILL) at teardown. `daemon` is shared by a whole
session (tests use distinct revision names, see `rid`); `fresh_daemon` is a
daemon of the test's own, which the test may restart(); `start_daemon(flags,
**client_options)` starts daemons of the test's own with extra flags (e.g.
--auth-tokens-file, TLS), each probed with those client options.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

import weightd

SOURCE_DIR = Path(__file__).resolve().parents[2]
WEIGHTD_BIN = os.environ.get("WEIGHTD_BIN", str(SOURCE_DIR / "build/api/weightd"))
WEIGHTCTL_BIN = os.environ.get("WEIGHTCTL_BIN", str(SOURCE_DIR / "build/api/weightctl"))


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """A weightd process in `root` (data in root/data, HOT tier in root/hot).

    `client_options` are the Client keywords (token, TLS files) that start()'s
    probe and client() use by default.
    """

    def __init__(self, root: Path, flags: Optional[List[str]] = None,
                 client_options: Optional[Dict[str, Any]] = None):
        self.root = root
        self.client_options = dict(client_options or {})
        self.address = f"127.0.0.1:{free_port()}"
        self.http_address = f"127.0.0.1:{free_port()}"
        self.flags = flags or []
        self.log = root / "weightd.log"
        self.process: Optional[subprocess.Popen] = None
        root.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        """Starts it and waits (up to 10 s) until it answers Status."""
        args = [WEIGHTD_BIN, "--data-dir", str(self.root / "data"),
                "--hot-dir", str(self.root / "hot"), "--listen", self.address,
                "--http-listen", self.http_address, "--log-level", "warn",
                # Tests only: no fsync per change, a reconciler that reacts fast.
                "--journal-sync", "nosync", "--reconcile-interval", "100ms", *self.flags]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        # Wait for the port first: a gRPC channel that failed to connect backs
        # off for a second or more before it tries again.
        host, port = self.address.rsplit(":", 1)
        deadline = time.monotonic() + 10
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"weightd exited with {self.process.returncode}:\n"
                                   + self.log.read_text(errors="replace"))
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                options = {"token": "", **self.client_options}
                with weightd.Client(self.address, timeout=2.0, attempts=1, **options) as probe:
                    try:
                        probe.status()
                    except (weightd.Unauthenticated, weightd.PermissionDenied):
                        pass  # it answers; the probe's credential is not the point
                return
            except (OSError, weightd.Unavailable):
                if time.monotonic() > deadline:
                    raise RuntimeError("weightd did not answer within 10 s:\n"
                                       + self.log.read_text(errors="replace")) from None
                time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        """Stops it and starts it again on the same port and directories."""
        self.stop()
        self.start()

    def client(self, **options) -> weightd.Client:
        """A Client of this daemon: its client_options, overridden by `options`."""
        return weightd.Client(self.address, **{"timeout": 10.0, **self.client_options, **options})

    def ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Runs weightctl against it."""
        result = subprocess.run([WEIGHTCTL_BIN, "--address", self.address, *args],
                                capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"weightctl {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}{result.stderr}")
        return result


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("weightd"))
    d.start()
    yield d
    d.stop()


@pytest.fixture
def fresh_daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path / "weightd")
    d.start()
    yield d
    d.stop()


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """start_daemon(flags, **client_options): a started daemon of the test's own with
    extra flags; every one is stopped at teardown."""
    started: List[Daemon] = []

    def start(flags: Optional[List[str]] = None, **client_options: Any) -> Daemon:
        d = Daemon(tmp_path / f"weightd-{len(started)}", flags, client_options)
        started.append(d)
        d.start()
        return d

    yield start
    for d in started:
        d.stop()


@pytest.fixture(scope="session")
def client(daemon: Daemon) -> Iterator[weightd.Client]:
    c = daemon.client()
    yield c
    c.close()


@pytest.fixture
def rid(request: pytest.FixtureRequest) -> str:
    """A revision id (without generation) no other test uses: default/<test name>@main."""
    return f"default/{re.sub(r'[^A-Za-z0-9_.-]', '-', request.node.name)}@main"


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A small model directory: a config, a nested file, an empty file, a symlink."""
    d = tmp_path / "model"
    (d / "tokenizer").mkdir(parents=True)
    (d / "config.json").write_text('{"hidden_size": 8}\n')
    (d / "tokenizer" / "vocab.txt").write_bytes(bytes(range(256)) * 40)
    (d / "empty.bin").write_bytes(b"")
    (d / "alias.json").symlink_to("config.json")
    return d


def tree(directory: Path) -> dict:
    """{relative path: bytes} of every file under `directory` (symlinks read through)."""
    return {p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}
