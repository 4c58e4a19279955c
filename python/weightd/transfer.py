"""Model directories in and out: what `weightctl import` and `export` do, in Python.

Both clients must leave the same objects behind, so that a revision imported
by one exports byte for byte with the other (api/cli/import_command.cpp is
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

The code: model_files.py (ModelFile: a directory walked and checked, or an
in-memory model), upload.py (the payload plan, the uploads, the manifest),
download.py (a manifest's files written out); this module runs the import
and the upsert (Begin → uploads → Commit, Abort on any failure), and every
public name those modules took from it is still importable from here.
"""

from __future__ import annotations

import time
from typing import List, Optional, Sequence

from . import ids
from ._proto import events_pb2 as ev
from ._proto import weightd_pb2 as pb
from .client import Client, new_request_id
from .download import ChunkWriter, export_manifest, parse_manifest
from .errors import Conflict, InvalidArgument, WeightdError
from .model_files import (ModelFile, Source, is_safe_relative_path, model_files,
                          model_files_from_mapping, walk_model_directory)
from .upload import (MANIFEST_FORMAT, PAYLOAD_BYTES, Payload, hot_paths, manifest_bytes,
                     plan_payloads, upload_payloads, upload_revision)

# Importable from here as before the split, though not in __all__ (named
# here so that pyflakes sees the imports used).
_REEXPORTED = (ChunkWriter, Payload, Source, hot_paths, upload_payloads)


# ------------------------------------------------------------- importing

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


__all__ = ["ModelFile", "PAYLOAD_BYTES", "MANIFEST_FORMAT", "walk_model_directory",
           "model_files", "model_files_from_mapping", "is_safe_relative_path", "plan_payloads",
           "manifest_bytes", "import_files", "upsert_files", "parse_manifest", "export_manifest"]
