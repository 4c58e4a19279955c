"""The upstream `weight_*` surface, as module-level functions.

Every function takes an optional ``client=``; without one it uses a
process-wide default `Client()` (address from $WEIGHTD_ADDRESS, else
127.0.0.1:7070; token from $WEIGHTD_TOKEN, tenant from $WEIGHTD_TENANT, CA
from $WEIGHTD_TLS_CA_FILE), made on first use — `set_default_client()`
replaces it.

Ids are text (``[tenant:]ns/resource@revision[#generation]``, the tenant
defaulting to the client's: with a token and no tenant chosen, the
credential's) or RevisionId messages. Without ``#generation``
an id means the highest READY generation — except for `weight_put`, where it
means the next one, as with `weightctl import`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Iterator, List, Mapping, Optional, Sequence, Union

from . import ids, transfer
from ._proto import events_pb2 as ev
from ._proto import weightd_pb2 as pb
from .client import Client, enum_value
from .errors import InvalidArgument, NotFound
from .lease import HeldLease, LeasedRevision, default_holder
from .watch import Watch

IdLike = ids.IdLike
#: A policy: the message, a preferred residency ("COLD"), or a dict
#: {"preferred": ..., "ratio": ..., "mode": ...}.
PolicyLike = Union[ev.Policy, str, Mapping[str, Any]]

_default_lock = threading.Lock()
_default: Optional[Client] = None


def default_client() -> Client:
    """The process-wide client the functions use when given none: `Client()`, configured
    by the environment ($WEIGHTD_ADDRESS, $WEIGHTD_TOKEN, $WEIGHTD_TENANT,
    $WEIGHTD_TLS_CA_FILE), read when it is first made."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


def set_default_client(client: Optional[Client]) -> None:
    """Makes `client` the default (None: a fresh one from the environment on next use)."""
    global _default
    with _default_lock:
        _default = client


def _client(client: Optional[Client]) -> Client:
    return client if client is not None else default_client()


def _ready(c: Client, id: IdLike) -> ev.RevisionId:
    """The id with its generation (the highest READY one when not given), else NotFound."""
    rid = c.resolve(id, ready_only=True)
    if not rid.weight_generation:
        raise NotFound.local(f"no READY revision {ids.format_id(rid)}")
    return rid


def make_policy(preferred: Union[str, int] = "HOT", ratio: float = 0.5,
                mode: Union[str, int] = "AUTO") -> ev.Policy:
    """A Policy: preferred residency HOT/COLD/MIXED, mixed_hot_ratio, mode AUTO/MANUAL/PINNED."""
    return ev.Policy(preferred_residency=enum_value(ev.Residency.DESCRIPTOR, preferred),
                     mixed_hot_ratio=ratio,
                     migration_mode=enum_value(ev.MigrationMode.DESCRIPTOR, mode))


def _policy(value: Optional[PolicyLike]) -> Optional[ev.Policy]:
    # weightctl's rule: what is not given is HOT, 0.5, AUTO.
    if value is None or isinstance(value, ev.Policy):
        return value
    if isinstance(value, str):
        return make_policy(value)
    if isinstance(value, Mapping):
        return make_policy(value.get("preferred", "HOT"),
                           value.get("ratio", value.get("mixed_hot_ratio", 0.5)),
                           value.get("mode", value.get("migration_mode", "AUTO")))
    raise TypeError(f"a policy is a Policy, a residency name or a dict, not {type(value).__name__}")


# ----------------------------------------------------------------- write

def weight_put(source: transfer.Source, id: IdLike, policy: Optional[PolicyLike] = None, *,
               jobs: int = 4, client: Optional[Client] = None) -> pb.RevisionView:
    """Imports a model as a revision and returns it READY, like `weightctl import DIR --as ID`.

    `source` is a directory (walked per SPEC §7: symlinks stored under their
    own path; anything unreadable stops it naming the path, before any upload),
    or a dict {path: bytes | numpy array | {tensor: array} | pathlib.Path}
    (arrays are written as safetensors files, see
    `transfer.model_files_from_mapping`). Without ``#generation`` the id gets
    the lineage's next generation. `jobs` uploads run at once. On failure the
    import is aborted and what was uploaded removed.
    """
    c = _client(client)
    return transfer.import_files(c, transfer.model_files(source), c.id(id), _policy(policy), jobs)


def weight_upsert(source: transfer.Source, base: IdLike, *,
                  target_generation: Optional[int] = None, mode: Union[str, int] = "PUT_FIRST",
                  policy: Optional[PolicyLike] = None, jobs: int = 4,
                  client: Optional[Client] = None) -> pb.RevisionView:
    """Replaces revision `base` by a higher generation of its lineage and returns
    the new one READY, like `weightctl upsert DIR --base ID` (SPEC §4 upsert).

    `source` is what `weight_put` takes. The new generation (default: the
    lineage's highest in any state + 1) is imported under a claim on the
    lineage (BeginUpsert) and committed with CommitUpsert; the lineage's
    watermark moves to it. `mode`:

    - "PUT_FIRST" (default): the base retires once the new generation is
      READY — new leases on it get `NotReady`, leases already held keep
      renewing until they end, policy changes and migrations get `Busy` —
      and is deleted when its last lease ends (`client.get_lineage(...)`
      shows the claim's phase: RETIRING_BASE, DELETING_BASE, COMPLETED).
    - "DELETE_FIRST": the base is deleted first, then the new generation is
      imported (saves capacity; no rollback). `Busy`, before anything
      happens, while a lease or an operation holds the base.

    Errors: a `target_generation` not above the base's is `InvalidArgument`;
    not above the lineage's watermark, or one that exists already,
    `Conflict`; another unfinished upsert of the lineage, `Busy`. A failure
    after the claim (an upload, the commit) aborts it (phase ABORTED; the
    daemon removes what was uploaded) and leaves a PUT_FIRST base READY.
    """
    c = _client(client)
    base_id = _ready(c, base)
    if target_generation is None:
        lineage = ev.RevisionId(tenant=base_id.tenant, ns=base_id.ns,
                                resource=base_id.resource, revision=base_id.revision)
        target_generation = c.resolve(lineage, ready_only=False).weight_generation + 1
    return transfer.upsert_files(c, transfer.model_files(source), base_id, target_generation,
                                 enum_value(pb.UpsertMode.DESCRIPTOR, mode), _policy(policy),
                                 jobs)


# ------------------------------------------------------------------ read

@contextlib.contextmanager
def weight_get(id: IdLike, ttl: float = 30.0, *, holder: Optional[str] = None,
               client: Optional[Client] = None) -> Iterator[LeasedRevision]:
    """A READY revision under a lease, for the `with` block::

        with weightd.weight_get("default/llama@main", ttl=30) as rev:
            config = rev.read("config.json")
            tensors = rev.open_safetensors("model.safetensors")

    The lease (`ttl` seconds, renewed every ttl/3 in the background) is
    released when the block ends, also by an exception. The revision's
    files are read from the daemon's memory-mapped replica files when this
    process runs on its host (OpenLocal), else streamed.
    """
    c = _client(client)
    rid = _ready(c, id)
    held = HeldLease.acquire(c, rid, holder or default_holder("get"), ttl)
    try:
        revision = LeasedRevision(c, rid, held)
        yield revision
    finally:
        held.release()


def weight_is_exist(id: IdLike, *, client: Optional[Client] = None) -> bool:
    """True when the revision is READY or DEGRADED (without #generation: any generation is)."""
    c = _client(client)
    try:
        c.get_revision(id=_ready(c, id))
        return True
    except NotFound:
        return False


def weight_get_metadata(id: IdLike, *, include_hidden: bool = False,
                        client: Optional[Client] = None) -> pb.RevisionView:
    """The RevisionView: availability, residency, policy, manifest ref, leases, ...

    With `include_hidden`, also IMPORTING, DELETING and DELETED records (and
    an id without #generation then means the highest in any state).
    """
    c = _client(client)
    rid = c.resolve(id, ready_only=not include_hidden)
    if not rid.weight_generation:
        raise NotFound.local(f"no {'' if include_hidden else 'READY '}revision "
                             f"{ids.format_id(rid)}")
    return c.get_revision(id=rid, include_hidden=include_hidden)


def weight_get_size(id: IdLike, *, client: Optional[Client] = None) -> int:
    """The revision's logical bytes: the sum of its files' sizes (at least 1)."""
    return weight_get_metadata(id, client=client).manifest.logical_bytes


def weight_list(ns: str = "default", resource: str = "", *, states: Sequence[Union[str, int]] = (),
                tenant: Optional[str] = None,
                client: Optional[Client] = None) -> List[pb.RevisionView]:
    """Every revision of a namespace (of one resource when given), every page, ordered by
    (resource, revision, generation); READY and DEGRADED unless `states` names others."""
    c = _client(client)
    out: List[pb.RevisionView] = []
    token = ""
    while True:
        page = c.list_revisions(tenant=tenant or c.tenant, ns=ns, resource=resource,
                                states=list(states), page_token=token, limit=1000)
        out.extend(page.revisions)
        token = page.next_page_token
        if not token:
            return out


# ---------------------------------------------------------------- change

def weight_update_policy(id: IdLike, policy: Optional[PolicyLike] = None, *,
                         preferred: Optional[Union[str, int]] = None,
                         ratio: Optional[float] = None, mode: Optional[Union[str, int]] = None,
                         expected_metadata_generation: Optional[int] = None,
                         client: Optional[Client] = None) -> pb.RevisionView:
    """Changes the policy: the whole `policy`, or only the parts given (`preferred`,
    `ratio`, `mode`) over the current one. Without `expected_metadata_generation`
    the current generation is read first (weightctl policy does the same)."""
    c = _client(client)
    rid = _ready(c, id)
    view = c.get_revision(id=rid)
    new = ev.Policy()
    new.CopyFrom(_policy(policy) if policy is not None else view.policy)
    if preferred is not None:
        new.preferred_residency = enum_value(ev.Residency.DESCRIPTOR, preferred)
    if ratio is not None:
        new.mixed_hot_ratio = ratio
    if mode is not None:
        new.migration_mode = enum_value(ev.MigrationMode.DESCRIPTOR, mode)
    expected = expected_metadata_generation or view.metadata_generation
    return c.update_policy(id=rid, expected_metadata_generation=expected, policy=new)


_TERMINAL = (pb.COMPLETED, pb.FAILED, pb.CANCELLED)


def weight_migrate(id: IdLike, target: Union[str, int], *, ratio: float = 0.0,
                   wait: bool = False, timeout: float = 600.0,
                   expected_metadata_generation: Optional[int] = None,
                   client: Optional[Client] = None) -> pb.Operation:
    """Starts moving the revision to `target` (HOT, COLD or MIXED; MIXED with
    `ratio`, 0 = the policy's) and returns the Operation; with `wait`, polls it
    until it is COMPLETED, FAILED or CANCELLED (at most `timeout` seconds)."""
    c = _client(client)
    rid = _ready(c, id)
    expected = expected_metadata_generation or c.get_revision(id=rid).metadata_generation
    op = c.migrate(id=rid, expected_metadata_generation=expected,
                   target=enum_value(ev.Residency.DESCRIPTOR, target), mixed_hot_ratio=ratio)
    deadline = time.monotonic() + timeout
    while wait and op.state not in _TERMINAL:
        if time.monotonic() > deadline:
            raise TimeoutError(f"operation {op.operation_id} still {pb.OperationState.Name(op.state)} "
                               f"after {timeout} s")
        time.sleep(0.05)
        op = c.get_operation(operation_id=op.operation_id)
    return op


def weight_get_operation(operation_id: int, *, client: Optional[Client] = None) -> pb.Operation:
    """An operation's kind, target, progress and state (terminal ones stay queryable)."""
    return _client(client).get_operation(operation_id=operation_id)


def weight_remove(id: IdLike, *, drain_timeout: float = 0.0,
                  expected_metadata_generation: Optional[int] = None,
                  client: Optional[Client] = None) -> pb.RemoveRevisionResponse:
    """Removes the revision: payloads, then the manifest; BUSY while a lease or an
    operation holds it. With `drain_timeout` (seconds) no new lease is granted and
    the delete waits for the leases to end, revoking them at the deadline."""
    c = _client(client)
    rid = _ready(c, id)
    expected = expected_metadata_generation or c.get_revision(id=rid).metadata_generation
    if drain_timeout < 0:
        raise InvalidArgument.local("drain_timeout must be at least 0")
    return c.remove_revision(id=rid, expected_metadata_generation=expected,
                             drain_timeout_ms=int(drain_timeout * 1000))


# ---------------------------------------------------------------- events

def history(id: IdLike, *, client: Optional[Client] = None) -> List[ev.Envelope]:
    """Every event of one revision in journal order (all pages); without #generation
    the highest generation in any state."""
    c = _client(client)
    rid = c.resolve(id, ready_only=False)
    if not rid.weight_generation:
        raise NotFound.local(f"no revision {ids.format_id(rid)}")
    events: List[ev.Envelope] = []
    token = ""
    while True:
        page = c.history(id=rid, page_token=token, limit=1000)
        events.extend(page.events)
        token = page.next_page_token
        if not token:
            return events


def watch(from_seq: int = 0, stream_prefix: str = "", types: Sequence[str] = (), *,
          give_up_after: Optional[float] = None, client: Optional[Client] = None) -> Watch:
    """Journal envelopes from `from_seq` (inclusive; 0 = from now) as an endless
    iterator that resumes by itself at last seen + 1 when the stream breaks."""
    return Watch(_client(client), from_seq, stream_prefix, types, give_up_after=give_up_after)


__all__ = ["default_client", "set_default_client", "make_policy", "weight_put", "weight_upsert",
           "weight_get", "weight_is_exist", "weight_get_metadata", "weight_get_size",
           "weight_list", "weight_update_policy", "weight_migrate", "weight_get_operation",
           "weight_remove", "history", "watch"]
