"""A revision's bytes up, as `weightctl import` sends them: the plan (every file
cut into payload objects of at most 64 MiB, keyed as weightctl keys them, and
the tier each goes to), the payloads put in parallel, then the manifest — what
transfer.py's import and upsert do between their Begin and Commit
(api/cli/import_command.cpp is the reference).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import threading
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence

from . import ids
from ._proto import events_pb2 as ev
from ._proto import weightd_pb2 as pb
from .client import Client
from .errors import ResourceExhausted, WeightdError
from .model_files import ModelFile
from .planner import plan_mixed

#: The largest payload object one file is cut into.
PAYLOAD_BYTES = 64 << 20
MANIFEST_FORMAT = "weightd.model/1"


# -------------------------------------------------------------- the plan

@dataclass
class Payload:
    """One payload object to upload: bytes [offset, offset + size) of a file."""
    file: ModelFile
    key: str
    offset: int
    size: int


def plan_payloads(files: Sequence[ModelFile], rid: ev.RevisionId) -> List[Payload]:
    """Every file cut into payloads of at most 64 MiB, keyed as weightctl keys them."""
    prefix = ids.files_prefix(rid)
    payloads: List[Payload] = []
    for f in files:
        parts = max(1, -(-f.size // PAYLOAD_BYTES))  # an empty file is one empty payload
        for i in range(parts):
            key = prefix + f.path + (f".part{i:04d}" if parts > 1 else "")
            offset = i * PAYLOAD_BYTES
            payloads.append(Payload(f, key, offset, min(PAYLOAD_BYTES, f.size - offset)))
    return payloads


def manifest_bytes(files: Sequence[ModelFile], payloads: Sequence[Payload],
                   digests: Mapping[str, str]) -> bytes:
    """The manifest JSON exactly as weightctl writes it (nlohmann's dump(2): every
    field in proto order, 2-space indent, UTF-8 unescaped, no final newline)."""
    doc = {"format": MANIFEST_FORMAT, "files": [
        {"path": f.path, "size": f.size, "sha256": digests[f.path],
         "chunks": [{"key": p.key, "offset": p.offset, "size": p.size}
                    for p in payloads if p.file is f]}
        for f in files]}
    return json.dumps(doc, indent=2, ensure_ascii=False).encode("utf-8")


def hot_paths(files: Sequence[ModelFile], policy: ev.Policy) -> set:
    """The files written straight to HOT: all for HOT, none for COLD, the planner's for MIXED."""
    if policy.preferred_residency == ev.RESIDENCY_HOT:
        return {f.path for f in files}
    if policy.preferred_residency == ev.RESIDENCY_MIXED:
        try:
            return plan_mixed([(f.path, f.size) for f in files], policy.mixed_hot_ratio)
        except WeightdError:
            return set()  # BeginImport already refused what the planner cannot plan
    return set()


# ------------------------------------------------------------- uploading

def upload_payloads(client: Client, rid: ev.RevisionId, payloads: Sequence[Payload],
                    hot: set, jobs: int, uploaded: List[str]) -> None:
    """Puts every payload with `jobs` uploads at once; the first failure stops them all.

    `uploaded` collects the keys stored so far (for the abort). A put refused
    with RESOURCE_EXHAUSTED because this import's other puts in flight hold
    the tenant's share of the tier (--tenant-reserve-ratio) waits for one of
    them to finish and tries again; alone in flight, the refusal stands.
    """
    group = ids.payload_group_id(rid)
    tasks = iter(payloads)
    lock = threading.Lock()
    flight = threading.Condition()
    state = {"in_flight": 0, "released": 0}
    failed = threading.Event()

    def put(p: Payload) -> None:
        while True:
            with flight:
                state["in_flight"] += 1
                released_before = state["released"]
            refused: Optional[ResourceExhausted] = None
            try:
                client.put_object(
                    p.file.read(p.offset, p.size), tenant=rid.tenant, key=p.key,
                    data_type=ev.DATA_TYPE_WEIGHT, group_id=group, affinity_id=p.file.path,
                    size=p.size, tier=ev.TIER_HOT if p.file.path in hot else ev.TIER_COLD)
            except ResourceExhausted as e:
                refused = e
            finally:
                with flight:
                    state["in_flight"] -= 1
                    if refused is None:
                        state["released"] += 1
                    flight.notify_all()
                    retry = False
                    if refused is not None and (state["in_flight"] > 0 or
                                                state["released"] != released_before):
                        flight.wait_for(lambda: failed.is_set() or state["in_flight"] == 0 or
                                        state["released"] != released_before)
                        retry = not failed.is_set() and state["released"] != released_before
            if refused is None:
                return
            if not retry:
                raise refused

    def worker() -> None:
        while not failed.is_set():
            with lock:
                p = next(tasks, None)
            if p is None:
                return
            try:
                put(p)
            except BaseException:
                failed.set()
                with flight:
                    flight.notify_all()  # a waiting sibling sees `failed` and stops
                raise
            with lock:
                uploaded.append(p.key)

    with concurrent.futures.ThreadPoolExecutor(max(1, min(jobs, len(payloads)))) as pool:
        futures = [pool.submit(worker) for _ in range(max(1, min(jobs, len(payloads))))]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]


def upload_revision(client: Client, rid: ev.RevisionId, files: Sequence[ModelFile],
                    begun: pb.RevisionView, jobs: int, uploaded: List[str],
                    request_id: str) -> pb.CommitImportRequest:
    """Payloads, then the manifest: the CommitImport request that publishes them.

    The files' sha256 is computed on a thread of its own while the bytes
    upload (hashing costs about as much CPU as the transfer).
    """
    payloads = plan_payloads(files, rid)
    with concurrent.futures.ThreadPoolExecutor(1) as hasher:
        digests = hasher.submit(lambda: {f.path: f.sha256() for f in files})
        upload_payloads(client, rid, payloads, hot_paths(files, begun.policy), jobs, uploaded)
        manifest = manifest_bytes(files, payloads, digests.result())
    key = ids.manifest_key(rid)
    info = client.put_object(manifest, tenant=rid.tenant, key=key,
                             data_type=ev.DATA_TYPE_METADATA, group_id=ids.payload_group_id(rid))
    uploaded.append(key)
    keys = [p.key for p in payloads]
    return pb.CommitImportRequest(
        id=rid, expected_metadata_generation=begun.metadata_generation,
        manifest=ev.ManifestRef(
            manifest_key=key,
            manifest_sha256=info.sha256 or hashlib.sha256(manifest).hexdigest(),
            payload_keys_sha256=ids.payload_keys_sha256(keys),
            payload_count=len(keys), logical_bytes=max(1, sum(f.size for f in files))),
        payload_keys=keys, request_id=request_id)


__all__ = ["PAYLOAD_BYTES", "MANIFEST_FORMAT", "Payload", "plan_payloads", "manifest_bytes",
           "hot_paths", "upload_payloads", "upload_revision"]
