"""Model directories in and out: what `weightctl import` and `export` do, in Python.

Both clients must leave the same objects behind, so that a revision imported
by one exports byte for byte with the other (api/cli/transfer_commands.cpp is
the reference):

- every file of the model becomes payload objects of at most 64 MiB, keyed
  ``weights/<enc ns>/<enc resource>/<enc revision>/<gen>/files/<path>`` (a
  file cut in several gets ``.part0000``, ``.part0001``, …), WEIGHT objects of
  the revision's group with the file's path as affinity id, written to the
  tier the policy gives the file (HOT, COLD or the MIXED planner's choice);
- the manifest is the JSON of ``ModelManifest`` ("weightd.model/1": each
  file's path, size, sha256 and chunks), indented by 2 as weightctl writes
  it, put last as the group's METADATA object;
- BeginImport → payloads (in parallel) → manifest → CommitImport; on any
  failure AbortImport removes what was uploaded.

A directory is walked and checked completely before anything is sent
(SPEC §7): a symlink is stored under its own path with its target's bytes;
a dangling link, a link to a directory, a FIFO or device, a file that cannot
be opened or a name that is not UTF-8 stops the import naming the path.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import stat
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from google.protobuf import json_format

from . import ids, safetensors
from ._proto import events_pb2 as ev
from ._proto import weightd_pb2 as pb
from .client import MAX_CHUNK_BYTES, Client, new_request_id
from .errors import Conflict, DataLoss, InvalidArgument, ResourceExhausted, WeightdError
from .planner import plan_mixed

#: The largest payload object one file is cut into.
PAYLOAD_BYTES = 64 << 20
MANIFEST_FORMAT = "weightd.model/1"
#: What weight_put accepts: a directory, or {path in the model: content}.
Source = Union[str, "os.PathLike[str]", Mapping[str, Any]]


# ------------------------------------------------------------ model files

@dataclass
class ModelFile:
    """One file of a model as the manifest records it.

    Its bytes come from `source` (a file on disk, read through a symlink) or
    from `data` (in memory), never both.
    """
    path: str                      # relative, '/'-separated, as the user sees it
    size: int
    source: Optional[str] = None
    data: Optional[bytes] = None

    def read(self, offset: int, size: int) -> Iterator[bytes]:
        """The bytes [offset, offset + size) in pieces of at most 4 MiB."""
        if self.data is not None:
            view = memoryview(self.data)
            for at in range(offset, offset + size, MAX_CHUNK_BYTES):
                yield view[at:min(at + MAX_CHUNK_BYTES, offset + size)]
            return
        assert self.source is not None
        with open(self.source, "rb") as f:
            f.seek(offset)
            left = size
            while left:
                piece = f.read(min(MAX_CHUNK_BYTES, left))
                if not piece:
                    raise InvalidArgument.local(
                        f"'{_escape(self.source)}' became shorter while it was imported")
                left -= len(piece)
                yield piece

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for piece in self.read(0, self.size):
            digest.update(piece)
        return digest.hexdigest()


def _escape(name: str) -> str:
    """`name` for an error message: undecodable bytes and control characters as \\xHH."""
    raw = os.fsencode(name)
    text = raw.decode("utf-8", errors="backslashreplace")
    return "".join(f"\\x{ord(c):02X}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)


def _os_error(what: str, path: str, error: OSError) -> InvalidArgument:
    return InvalidArgument.local(f"cannot import: {what} '{_escape(path)}': "
                                 f"{error.strerror or error}")


def _walk(directory: str, rel: str, out: List[ModelFile]) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError as e:
        raise _os_error("cannot read directory", directory, e) from e
    for entry in entries:
        full = os.path.join(directory, entry.name)
        path = f"{rel}/{entry.name}" if rel else entry.name
        try:
            entry.name.encode("utf-8")  # a non-UTF-8 name decodes to lone surrogates
        except UnicodeEncodeError:
            raise InvalidArgument.local(
                f"cannot import '{_escape(full)}': the file name is not UTF-8 (the bytes "
                "shown as \\xHH); rename it") from None
        try:
            link = os.lstat(full)
        except OSError as e:
            raise _os_error("cannot stat", full, e) from e
        target = link
        if stat.S_ISLNK(link.st_mode):
            try:
                target = os.stat(full)
            except OSError as e:
                raise _os_error("dangling symlink", full, e) from e
        if stat.S_ISDIR(target.st_mode):
            if stat.S_ISLNK(link.st_mode):
                raise InvalidArgument.local(
                    f"cannot import '{_escape(full)}': a symlink to a directory is not "
                    "followed; link the files instead")
            _walk(full, path, out)
            continue
        if not stat.S_ISREG(target.st_mode):
            raise InvalidArgument.local(f"cannot import '{_escape(full)}': not a regular file, "
                                        "directory or symlink to a file")
        try:
            os.close(os.open(full, os.O_RDONLY | os.O_CLOEXEC))  # readable, or say so now
        except OSError as e:
            raise _os_error("cannot open", full, e) from e
        out.append(ModelFile(path, target.st_size, source=full))


def walk_model_directory(directory: Union[str, "os.PathLike[str]"]) -> List[ModelFile]:
    """Every file under `directory`, in path order (bytewise), checked readable."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise InvalidArgument.local(f"DIR '{directory}' is not a directory")
    files: List[ModelFile] = []
    _walk(directory, "", files)
    files.sort(key=lambda f: f.path.encode("utf-8"))
    if not files:
        raise InvalidArgument.local(f"DIR '{directory}' has no files")
    return files


def is_safe_relative_path(path: str) -> bool:
    """True when `path` is relative with no empty, "." or ".." segment ("w..v2.bin" is fine)."""
    return bool(path) and all(seg not in ("", ".", "..") for seg in path.split("/"))


def _safetensors_name(name: str) -> str:
    return name if name.endswith(".safetensors") else name + ".safetensors"


def model_files_from_mapping(contents: Mapping[str, Any]) -> List[ModelFile]:
    """The files of an in-memory model ``{path: content}``, in path order.

    Content may be:
      - bytes (bytearray, memoryview): the file's bytes as they are;
      - a numpy array: a safetensors file holding that one tensor, named by the
        path without ".safetensors"; the file's path gets ".safetensors"
        appended unless it ends with it (``{"embed": a}`` → embed.safetensors
        with tensor "embed");
      - a mapping {tensor name: numpy array}: a safetensors file of those
        tensors, under the same path rule;
      - a pathlib.Path (os.PathLike): that file on disk, read through symlinks.
    """
    files: Dict[str, ModelFile] = {}
    for name, value in contents.items():
        if isinstance(value, (bytes, bytearray, memoryview)):
            path, data = name, bytes(value)
        elif isinstance(value, np.ndarray):
            path = _safetensors_name(name)
            data = safetensors.dumps({path[: -len(".safetensors")]: value})
        elif isinstance(value, Mapping):
            path, data = _safetensors_name(name), safetensors.dumps(value)
        elif isinstance(value, os.PathLike):
            source = os.fspath(value)
            try:
                size = os.stat(source).st_size
                os.close(os.open(source, os.O_RDONLY | os.O_CLOEXEC))
            except OSError as e:
                raise _os_error("cannot open", source, e) from e
            if not is_safe_relative_path(name):
                raise InvalidArgument.local(f"'{name}' is not a safe relative path")
            files[name] = ModelFile(name, size, source=source)
            continue
        else:
            raise TypeError(f"{name!r}: a model file is bytes, a numpy array, a dict of arrays "
                            f"or a pathlib.Path, not {type(value).__name__}")
        if not is_safe_relative_path(path):
            raise InvalidArgument.local(f"'{path}' is not a safe relative path (no empty, '.' "
                                        "or '..' segment, not absolute)")
        if path in files:
            raise InvalidArgument.local(f"two entries become the file '{path}'")
        files[path] = ModelFile(path, len(data), data=data)
    if not files:
        raise InvalidArgument.local("the model has no files")
    return sorted(files.values(), key=lambda f: f.path.encode("utf-8"))


def model_files(source: Source) -> List[ModelFile]:
    """The files of a directory path or of an in-memory mapping (see above)."""
    if isinstance(source, Mapping):
        return model_files_from_mapping(source)
    return walk_model_directory(source)


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


def begin_request(rid: ev.RevisionId, files: Sequence[ModelFile],
                  policy: Optional[ev.Policy], request_id: str) -> pb.BeginImportRequest:
    """The BeginImport weightctl sends: counts, bytes, one affinity unit per file."""
    req = pb.BeginImportRequest(
        id=rid, expected_payload_count=len(plan_payloads(files, rid)),
        expected_logical_bytes=max(1, sum(f.size for f in files)),
        affinity_count=len(files), request_id=request_id)
    if policy is not None:
        req.policy.CopyFrom(policy)
    return req


def import_files(client: Client, files: Sequence[ModelFile], rid: ev.RevisionId,
                 policy: Optional[ev.Policy] = None, jobs: int = 4) -> pb.RevisionView:
    """BeginImport → payloads → manifest → CommitImport; AbortImport on any failure.

    `rid` without a generation gets the lineage's next one (highest in any state + 1).
    """
    if not 1 <= jobs <= 64:
        raise InvalidArgument.local("jobs must be 1..64")
    rid = client.id(rid)
    if not rid.weight_generation:
        rid.weight_generation = client.resolve(rid, ready_only=False).weight_generation + 1
    request_id = new_request_id()
    begun = client.begin_import(begin_request(rid, files, policy, request_id))
    _adopt_tenant(rid, begun.id)
    uploaded: List[str] = []
    try:
        commit = upload_revision(client, rid, files, begun, jobs, uploaded, request_id)
        return client.commit_import(commit)
    except BaseException as failure:
        _abort(client, rid, begun, uploaded, request_id, failure)
        raise


def _adopt_tenant(rid: ev.RevisionId, answered: ev.RevisionId) -> None:
    """A tenant left empty (a client with a token, SPEC §9) becomes the one the
    daemon filled in: the group id the payloads are put under is computed
    from it, as the daemon computes it."""
    if not rid.tenant:
        rid.tenant = answered.tenant


def _abort(client: Client, rid: ev.RevisionId, begun: pb.RevisionView, uploaded: List[str],
           request_id: str, failure: BaseException) -> None:
    keys = list(dict.fromkeys(uploaded + [ids.manifest_key(rid)]))
    try:
        client.abort_import(id=rid, expected_metadata_generation=begun.metadata_generation,
                            keys_to_remove=keys, request_id=request_id)
    except WeightdError as e:  # the original failure is what the caller must see
        if hasattr(failure, "add_note"):  # Python 3.11+
            failure.add_note(f"aborting failed too ({e}): run "
                             f"`weightctl abort {ids.format_id(rid)}`")


#: How long upsert_files waits for a DELETE_FIRST base still being deleted.
UPSERT_BASE_DELETE_WAIT = 600.0


def _claim_now(client: Client, base: ev.RevisionId, request_id: str) -> pb.UpsertClaim:
    """The lineage's claim, which must be `request_id`'s (Conflict otherwise)."""
    lineage = client.get_lineage(tenant=base.tenant, ns=base.ns, resource=base.resource,
                                 revision=base.revision)
    if lineage.claim.request_id != request_id:
        raise Conflict.local(f"the claim of lineage {ids.format_id(_lineage_of(base))} is "
                             f"'{lineage.claim.request_id}', not '{request_id}'")
    return lineage.claim


def _copy_id(rid: ev.RevisionId) -> ev.RevisionId:
    out = ev.RevisionId()
    out.CopyFrom(rid)
    return out


def _lineage_of(rid: ev.RevisionId) -> ev.RevisionId:
    return ev.RevisionId(tenant=rid.tenant, ns=rid.ns, resource=rid.resource,
                         revision=rid.revision)


def upsert_files(client: Client, files: Sequence[ModelFile], base: ev.RevisionId,
                 target_generation: int, mode: int, policy: Optional[ev.Policy],
                 jobs: int = 4) -> pb.RevisionView:
    """Lineage replacement (SPEC §4), as `weightctl upsert` does it: BeginUpsert →
    payloads → manifest → CommitUpsert; returns the target READY.

    One fresh request id names the claim throughout (the base's retired_by).
    PUT_FIRST: the base retires once the target is committed (no new lease,
    deleted when its leases end). DELETE_FIRST: the base is deleted first —
    BUSY, before anything happens, while a lease or an operation holds it; a
    large base may still be deleting when BeginUpsert returns, which is waited
    for (at most UPSERT_BASE_DELETE_WAIT seconds). On any failure after the
    claim, AbortUpsert ends it (phase ABORTED) and the daemon removes the
    target's uploads; a PUT_FIRST base is left untouched.
    """
    if not 1 <= jobs <= 64:
        raise InvalidArgument.local("jobs must be 1..64")
    base_view = client.get_revision(id=base)
    if not base.tenant:
        base = _copy_id(base)
        _adopt_tenant(base, base_view.id)
    target = ev.RevisionId()
    target.CopyFrom(base)
    target.weight_generation = target_generation
    request_id = new_request_id()
    claim = client.begin_upsert(
        base=base, expected_metadata_generation=base_view.metadata_generation,
        target_generation=target_generation, mode=mode, request_id=request_id,
        **{"import": begin_request(target, files, policy, request_id)})
    try:
        deadline = time.monotonic() + UPSERT_BASE_DELETE_WAIT
        while claim.phase == "DELETING_BASE":
            if time.monotonic() > deadline:
                raise TimeoutError(f"the base {ids.format_id(base)} of claim '{request_id}' "
                                   f"is still being deleted after {UPSERT_BASE_DELETE_WAIT} s")
            time.sleep(0.05)
            claim = _claim_now(client, base, request_id)
        if claim.phase != "IMPORTING_TARGET":
            raise Conflict.local(f"claim '{request_id}' is {claim.phase or 'gone'}, not "
                                 "importing its target")
        begun = client.get_revision(id=target, include_hidden=True)
        commit = upload_revision(client, target, files, begun, jobs, [], request_id)
        return client.commit_upsert(target=target, request_id=request_id, commit=commit)
    except BaseException as failure:
        # When the daemon has aborted the claim itself (a refused commit),
        # AbortUpsert answers with it, ABORTED, again.
        try:
            client.abort_upsert(base=base, request_id=request_id)
        except WeightdError as e:  # the original failure is what the caller must see
            if hasattr(failure, "add_note"):  # Python 3.11+
                failure.add_note(f"aborting the upsert failed too ({e}): run `weightctl "
                                 f"lineage {ids.format_id(_lineage_of(base))} --abort "
                                 f"{request_id}`")
        raise


# -------------------------------------------------------------- export

def parse_manifest(text: bytes, rid: ev.RevisionId) -> pb.ModelManifest:
    """The manifest object's JSON as a ModelManifest; DataLoss when it is none, or when
    a path is unsafe (checked before anything is written, as weightctl does)."""
    manifest = pb.ModelManifest()
    try:
        json_format.Parse(text.decode("utf-8"), manifest)
    except (json_format.ParseError, UnicodeDecodeError) as e:
        raise DataLoss.local(f"the manifest of {ids.format_id(rid)} is not a weightctl model "
                             f"manifest ({e})") from e
    for f in manifest.files:
        if not is_safe_relative_path(f.path):
            raise DataLoss.local(
                f"the manifest of {ids.format_id(rid)} names an unsafe path '{_escape(f.path)}' "
                "(an empty, '.' or '..' segment, or absolute)")
    return manifest


#: write_chunk(chunk, sink): calls sink(bytes) with the payload's bytes, in order.
ChunkWriter = Callable[[pb.ManifestChunk, Callable[[bytes], Any]], None]


def export_manifest(manifest: pb.ModelManifest, directory: Union[str, "os.PathLike[str]"],
                    write_chunk: ChunkWriter, check: Callable[[], None]) -> Tuple[int, int]:
    """Writes every file of `manifest` under `directory`; returns (files, bytes).

    Each file is written under a temporary name with its sha256 computed on
    the way; only when every file matched the manifest are they renamed into
    place, so a failed export leaves none of its files behind. `check` is
    called between pieces (it raises when the lease was lost).
    """
    directory = os.fspath(directory)
    pending: List[Tuple[str, str]] = []  # (temp, target)
    total = 0
    try:
        for f in manifest.files:
            target = os.path.join(directory, *f.path.split("/"))
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            temp = target + ".weightd-partial"
            pending.append((temp, target))
            digest = hashlib.sha256()
            size = 0
            with open(temp, "wb") as out:
                def sink(piece: bytes) -> None:
                    nonlocal size
                    check()
                    out.write(piece)
                    digest.update(piece)
                    size += len(piece)
                for chunk in f.chunks:
                    write_chunk(chunk, sink)
            if digest.hexdigest() != f.sha256 or size != f.size:
                raise DataLoss.local(f"'{f.path}' failed its sha256 check; the revision may be "
                                     "damaged: look at its availability and retry")
            total += size
        for temp, target in pending:
            os.replace(temp, target)
        pending.clear()
    finally:
        for temp, _ in pending:
            try:
                os.remove(temp)
            except FileNotFoundError:
                pass
    return len(manifest.files), total


__all__ = ["ModelFile", "PAYLOAD_BYTES", "MANIFEST_FORMAT", "walk_model_directory",
           "model_files", "model_files_from_mapping", "is_safe_relative_path", "plan_payloads",
           "manifest_bytes", "import_files", "upsert_files", "parse_manifest", "export_manifest"]
