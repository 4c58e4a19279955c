"""Reading a revision under a lease (SPEC §4 Leases, Local reads).

A lease keeps a READY revision from being deleted, and its replicas from
being dropped, while it is read. `HeldLease` acquires one, renews it from a
background thread every ttl/3 (so a reader that holds it for hours never
loses it), and releases it on close. `LeasedRevision` is what
`weight_get()` yields: the revision's files, read

- from the daemon's own replica files, memory-mapped read-only, when
  OpenLocal answers and the files can be opened (a reader on the daemon's
  host: no copy through gRPC, and `open_safetensors` is zero-copy);
- otherwise streamed with ObjectService.Get.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import mmap
import os
import socket
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import ids, safetensors, transfer
from ._proto import events_pb2 as ev
from ._proto import weightd_pb2 as pb
from .client import Client
from .errors import DataLoss, LeaseExpired, NotFound, WeightdError

_holders = itertools.count(1)


def default_holder(purpose: str = "get") -> str:
    """``python-<purpose>@<host>:<pid>:<n>``: who holds a lease, unique per acquisition.

    The daemon hands a holder's live lease back to the same holder, so two
    readers in one process that shared a name would also share (and release)
    one lease: the counter keeps them apart.
    """
    return f"python-{purpose}@{socket.gethostname()}:{os.getpid()}:{next(_holders)}"


class HeldLease:
    """A revision lease renewed in the background until `release()`."""

    def __init__(self, client: Client, lease: pb.Lease, ttl: float):
        self.client = client
        self.lease = lease
        self.ttl = ttl
        self._stop = threading.Event()
        self._error: Optional[WeightdError] = None
        self._renewer = threading.Thread(target=self._renew_loop, daemon=True,
                                         name=f"weightd-lease-{lease.lease_id}")
        self._renewer.start()

    @classmethod
    def acquire(cls, client: Client, rid: ev.RevisionId, holder: str, ttl: float) -> "HeldLease":
        """AcquireLease for `ttl` seconds (1 ms .. 24 h), then renewals every ttl/3."""
        ttl_ms = max(1, int(round(ttl * 1000)))
        lease = client.acquire_lease(id=rid, holder=holder, ttl_ms=ttl_ms)
        return cls(client, lease, ttl)

    @property
    def lease_id(self) -> int:
        return self.lease.lease_id

    def _renew_loop(self) -> None:
        ttl_ms = max(1, int(round(self.ttl * 1000)))
        while not self._stop.wait(self.ttl / 3):
            try:
                self.lease = self.client.renew_lease(lease_id=self.lease_id, ttl_ms=ttl_ms,
                                                     timeout=max(1.0, self.ttl / 3))
                self._error = None
            except WeightdError as e:
                self._error = e
                # Expired or revoked: no renewal can bring it back. Anything else
                # (a daemon restarting) may pass: keep trying while time is left.
                if isinstance(e, (LeaseExpired, NotFound)):
                    return

    @property
    def renewal_error(self) -> Optional[WeightdError]:
        """The last renewal's failure, None while renewals succeed."""
        return self._error

    def check(self) -> None:
        """Raises when the lease is gone (expired, revoked, released): reads would be unprotected."""
        if self._stop.is_set():
            raise LeaseExpired.local(f"lease {self.lease_id} was released: read inside the "
                                     "`with weight_get(...)` block")
        if isinstance(self._error, (LeaseExpired, NotFound)):
            raise LeaseExpired.local(f"lease {self.lease_id} was lost ({self._error}); "
                                     "acquire a new one")

    def release(self) -> None:
        """Stops renewing and releases the lease (best effort: it also expires by itself)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._renewer.join()
        try:
            self.client.release_lease(lease_id=self.lease_id)
        except WeightdError:
            pass


class _File:
    """One model file as pieces: (offset in the file, buffer) per payload, in order.

    A slice inside one payload is a zero-copy view of its buffer; one that
    crosses a payload boundary (a file larger than 64 MiB) is copied.
    """

    def __init__(self, size: int, pieces: List[Tuple[int, memoryview]]):
        self.size = size
        self.pieces = pieces

    def read(self, start: int, end: int) -> memoryview:
        parts = []
        for offset, buf in self.pieces:
            lo, hi = max(start, offset), min(end, offset + len(buf))
            if lo < hi:
                parts.append(buf[lo - offset:hi - offset])
        if len(parts) == 1:
            return parts[0]
        return memoryview(b"".join(parts))


class LeasedRevision:
    """A READY revision under a live lease: its manifest and its files.

    Attributes:
        id: the revision (with its generation).
        lease: the `pb.Lease` held (renewed in the background).
        view: the RevisionView read right after the lease was granted.
        manifest: the revision's `pb.ModelManifest` (path, size, sha256, chunks).
        local_error: why reads are streamed rather than mapped (None while they are not).
    """

    def __init__(self, client: Client, rid: ev.RevisionId, held: HeldLease):
        self.client = client
        self.id = rid
        self._held = held
        self.view = client.get_revision(id=rid)
        if not rid.tenant:  # left to the daemon (a client with a token): the one it filled in
            self.id = ev.RevisionId()
            self.id.CopyFrom(rid)
            self.id.tenant = self.view.id.tenant
        self._manifest: Optional[pb.ModelManifest] = None
        self._local: Optional[Dict[str, pb.LocalFile]] = None
        self.local_error: Optional[WeightdError] = None  # why reads are not local, if so
        self._maps: Dict[str, memoryview] = {}

    @property
    def manifest(self) -> pb.ModelManifest:
        """The model manifest, read on first use: a revision not imported as a model
        directory can still be leased (and its objects read with local_files()).
        DataLoss when it is not a weightctl manifest or names an unsafe path."""
        if self._manifest is None:
            self._held.check()
            _, text = self.client.get_object(tenant=self.id.tenant,
                                             key=self.view.manifest.manifest_key)
            self._manifest = transfer.parse_manifest(text, self.id)
        return self._manifest

    @property
    def lease(self) -> pb.Lease:
        return self._held.lease

    @property
    def renewal_error(self) -> Optional[WeightdError]:
        return self._held.renewal_error

    def files(self) -> List[str]:
        """The model's file paths, in manifest (path) order."""
        return [f.path for f in self.manifest.files]

    def file_info(self, path: str) -> pb.ManifestFile:
        """The manifest entry of `path` (size, sha256, chunks); NotFound when absent."""
        for f in self.manifest.files:
            if f.path == path:
                return f
        raise NotFound.local(f"{ids.format_id(self.id)} has no file '{path}'")

    # ------------------------------------------------------- where bytes are

    def local_files(self) -> Dict[str, pb.LocalFile]:
        """OpenLocal's answer by object key; {} when the daemon does not serve it
        (an older weightd, --local-reads=false: see local_error). A listed file
        that cannot be opened here (a daemon on another host) is streamed."""
        if self._local is None:
            try:
                answer = self.client.open_local(id=self.id, lease_id=self._held.lease_id)
                self._local = {f.key: f for f in answer.payloads}
            except WeightdError as e:
                self.local_error, self._local = e, {}
        return self._local

    def _mapped(self, key: str) -> Optional[memoryview]:
        """The payload's bytes mapped from its replica file, None to stream it instead."""
        if key in self._maps:
            return self._maps[key]
        local = self.local_files().get(key)
        if local is None:
            return None
        try:
            with open(local.path, "rb") as f:
                if os.fstat(f.fileno()).st_size < local.offset + local.size:
                    return None  # not the file the daemon described (moved meanwhile)
                if local.size == 0:
                    view = memoryview(b"")
                else:
                    mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                    view = memoryview(mapped)[local.offset:local.offset + local.size]
        except (OSError, ValueError):
            return None  # another host, or no permission: Get works everywhere
        self._maps[key] = view
        return view

    def _payload(self, key: str) -> memoryview:
        self._held.check()
        view = self._mapped(key)
        if view is None:
            _, data = self.client.get_object(tenant=self.id.tenant, key=key)
            view = memoryview(data)
        return view

    def _file(self, path: str) -> _File:
        f = self.file_info(path)
        return _File(f.size, [(c.offset, self._payload(c.key)) for c in f.chunks])

    # ----------------------------------------------------------- reading

    def read(self, path: str, verify: bool = True) -> bytes:
        """The bytes of one file, checked against the manifest's sha256 (DataLoss if not)."""
        f = self.file_info(path)
        data = bytes(self._file(path).read(0, f.size))
        if verify and (len(data) != f.size or hashlib.sha256(data).hexdigest() != f.sha256):
            raise DataLoss.local(f"'{path}' of {ids.format_id(self.id)} failed its sha256 check")
        return data

    def open_safetensors(self, path: str, torch: bool = False) -> Dict[str, Any]:
        """The tensors of a safetensors file: numpy arrays (read-only), or torch tensors.

        With local reads every array is a view of the memory-mapped replica
        file (zero-copy; a tensor that crosses a 64 MiB payload boundary is
        the one copied); otherwise the file is downloaded into memory and the
        arrays are views of that. No sha256 check (it would read every
        byte); `read()` has one. Use the arrays inside the `with` block: the
        lease is what keeps the daemon from dropping the files.
        """
        if torch:
            importlib.import_module("torch")  # ImportError here, before any download
        f = self._file(path)
        return safetensors.load_from(f.read, f.size, torch=torch)

    def export(self, directory: Union[str, "os.PathLike[str]"]) -> Tuple[int, int]:
        """Writes every file under `directory` as `weightctl export` does; returns
        (files, bytes). Every file is verified against its sha256 before it is
        renamed into place; manifest paths that could escape `directory` were
        refused when the manifest was read."""
        def write_chunk(chunk: pb.ManifestChunk, sink: Callable[[bytes], Any]) -> None:
            view = self._mapped(chunk.key)
            if view is None:
                self.client.get_object_to(sink, tenant=self.id.tenant, key=chunk.key)
                return
            for at in range(0, len(view), 4 << 20):
                sink(view[at:at + (4 << 20)])
        return transfer.export_manifest(self.manifest, directory, write_chunk, self._held.check)

    def close(self) -> None:
        """Releases the lease (what leaving the `with` block does)."""
        self._held.release()
        self._maps.clear()  # arrays still using a mapping keep it alive themselves


__all__ = ["HeldLease", "LeasedRevision", "default_holder"]
