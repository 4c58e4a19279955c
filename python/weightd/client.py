"""`Client`: one method per RPC of WeightService, ObjectService and AdminService.

Each method takes either the request message or its fields as keyword
arguments, and returns the response message (api/weightd.proto is the
reference for both). Keyword arguments are converted where that is
unambiguous: a revision id may be given as text (``"default/llama@main#1"``),
an enum by name (``"COLD"``, ``"RESIDENCY_COLD"``, ``"READY"``), a message
field as a dict. Left empty, a request's ``tenant`` becomes the client's and
its ``request_id`` a fresh ``python-<16 hex>`` (so the daemon's log and the
journal name the call).

Security (SPEC §9): with a token every call (unary and streaming) carries
``authorization: Bearer <token>``, and a client given no tenant of its own
leaves tenants empty, so that the daemon takes the credential's; TLS (and
mutual TLS with a client certificate) from PEM files.

Every call has a finite timeout (`timeout` for unary calls, `stream_timeout`
for one object's Put or Get, `watch_timeout` for one Watch stream). A call
that reached no daemon is retried a few times with backoff — safe for every
RPC, since mutations are fenced by expected_metadata_generation and a retry is
recognised by its digest (SPEC §4) — then raised as `Unavailable`. Every
failure is a typed `WeightdError` (errors.py).

RPC → method: BeginImport → begin_import, …, Watch → watch (one raw stream;
`weightd.watch` is the one that resumes), ObjectService Put/Get/Stat/Remove/
BatchRemove/RemoveAll/Evict/List → put_object/get_object/stat_object/
remove_object/batch_remove_objects/remove_all_objects/evict/list_objects,
AdminService Status/Snapshot → status/snapshot.

The code: this module has `Client`'s constructor (address, tenant, token,
TLS files), its helpers and its WeightService and AdminService methods;
rpc.py the request building, timeouts and retries (`_Calls`) and the server
streams; objects.py the ObjectService methods (`_ObjectService`). `Client`
inherits the last two; every public name is importable from here as before.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

import grpc

from ._proto import events_pb2 as ev
from ._proto import weightd_pb2 as pb
from ._proto import weightd_pb2_grpc as pb_grpc
from .errors import InvalidArgument
from .ids import DEFAULT_TENANT, IdLike, RevisionId, to_revision_id
from .objects import MAX_CHUNK_BYTES, _ObjectService
from .rpc import _Calls, _Stream, enum_value, new_request_id

#: The daemon's default gRPC address (SPEC §8).
DEFAULT_ADDRESS = "127.0.0.1:7070"


def _read_pem(path: Optional[str], what: str) -> Optional[bytes]:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InvalidArgument.local(f"{what} '{path}' cannot be read: {e.strerror or e}") from e
    if not data.strip():
        raise InvalidArgument.local(f"{what} '{path}' is empty")
    return data


def tls_credentials(ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                    key_file: Optional[str] = None) -> Optional[grpc.ChannelCredentials]:
    """The channel credentials of the TLS files (PEM paths), None when none is given.

    Without `ca_file` the daemon's certificate is checked against the system's
    roots; `cert_file` and `key_file` (both or neither) are the client's
    certificate for a daemon that requires one (--tls-client-ca-file).
    """
    if not (ca_file or cert_file or key_file):
        return None
    if bool(cert_file) != bool(key_file):
        raise InvalidArgument.local("tls_cert_file and tls_key_file go together: give both "
                                    "(mutual TLS) or neither")
    return grpc.ssl_channel_credentials(
        root_certificates=_read_pem(ca_file, "tls_ca_file"),
        private_key=_read_pem(key_file, "tls_key_file"),
        certificate_chain=_read_pem(cert_file, "tls_cert_file"))


class Client(_ObjectService, _Calls):
    """A connection to one weightd daemon.

    Args:
        address: host:port of the daemon's gRPC listener; default
            ``$WEIGHTD_ADDRESS``, else 127.0.0.1:7070.
        tenant: the tenant of ids given without ``tenant:`` and of requests
            that leave ``tenant`` empty; default ``$WEIGHTD_TENANT``, else —
            with a token — "" (requests leave it to the daemon, which uses
            the credential's tenant; the ids returned name it), else
            "default". Naming a tenant other than the credential's is
            PermissionDenied unless the token is an admin's.
        token: sent as ``authorization: Bearer <token>`` with every call
            (SPEC §9); default ``$WEIGHTD_TOKEN``, else none (a daemon
            without --auth-tokens-file). ``""`` = none, whatever the
            environment says.
        tls_ca_file: PEM file of the CA that signed the daemon's certificate;
            default ``$WEIGHTD_TLS_CA_FILE`` (unless `credentials` is given).
            Any of the three TLS files set: the channel is TLS (without a CA
            file, the daemon's certificate is checked against the system's
            roots).
        tls_cert_file, tls_key_file: PEM client certificate (chain) and its
            private key, for a daemon with --tls-client-ca-file (mutual
            TLS); both or neither.
        credentials: `grpc.ChannelCredentials` made by the caller, instead
            of the TLS files.
        timeout: seconds for each unary call.
        stream_timeout: seconds for one object's Put or Get.
        watch_timeout: seconds one Watch stream lasts before it is ended
            (`weightd.watch` then reconnects where it stopped).
        attempts: tries for a call that reached no daemon.

    A TLS file that cannot be read, or a certificate without its key, is
    `InvalidArgument` here. A daemon that refuses the TLS handshake (no
    client certificate, an untrusted CA) is `Unavailable` on the first call;
    a missing or unknown token `Unauthenticated`, a role too low
    `PermissionDenied` (its message names the role needed).
    """

    def __init__(self, address: Optional[str] = None, tenant: Optional[str] = None, *,
                 token: Optional[str] = None,
                 tls_ca_file: Optional[str] = None, tls_cert_file: Optional[str] = None,
                 tls_key_file: Optional[str] = None,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 timeout: float = 30.0, stream_timeout: float = 600.0,
                 watch_timeout: float = 300.0, attempts: int = 3):
        self.address = address or os.environ.get("WEIGHTD_ADDRESS") or DEFAULT_ADDRESS
        if token is None:
            token = os.environ.get("WEIGHTD_TOKEN", "")
        token = token.strip()
        #: True when the client sends a bearer token.
        self.has_token = bool(token)
        explicit_tenant = tenant or os.environ.get("WEIGHTD_TENANT")
        # With a token the daemon knows the caller's tenant: an id or request
        # naming none is the credential's (as weightctl does).
        self.tenant = explicit_tenant or ("" if token else DEFAULT_TENANT)
        self.timeout = timeout
        self.stream_timeout = stream_timeout
        self.watch_timeout = watch_timeout
        self.attempts = max(1, attempts)
        self._metadata: Tuple[Tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ())
        if credentials is None:
            if tls_ca_file is None:
                tls_ca_file = os.environ.get("WEIGHTD_TLS_CA_FILE") or None
            credentials = tls_credentials(tls_ca_file, tls_cert_file, tls_key_file)
        elif tls_ca_file or tls_cert_file or tls_key_file:
            raise TypeError("give credentials= or the tls_*_file paths, not both")
        #: True when the channel is TLS.
        self.secure = credentials is not None
        options = [
            # Put chunks are up to 4 MiB plus framing; a History page may be large.
            ("grpc.max_send_message_length", MAX_CHUNK_BYTES + (64 << 10)),
            ("grpc.max_receive_message_length", 64 << 20),
            # A daemon that restarts is back within a second: reconnect soon
            # (gRPC's default waits 1 s, then up to 2 minutes).
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 5000),
        ]
        if credentials is not None:
            self._channel = grpc.secure_channel(self.address, credentials, options)
        else:
            self._channel = grpc.insecure_channel(self.address, options)
        self._weights = pb_grpc.WeightServiceStub(self._channel)
        self._objects = pb_grpc.ObjectServiceStub(self._channel)
        self._admin = pb_grpc.AdminServiceStub(self._channel)

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Closes the channel; calls in flight end with Unavailable."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        tenant = repr(self.tenant) if self.tenant else "the token's"
        return (f"weightd.Client(address={self.address!r}, tenant={tenant}"
                f"{', token' if self.has_token else ''}{', TLS' if self.secure else ''})")

    # -------------------------------------------------------------- helpers

    def id(self, value: IdLike) -> RevisionId:
        """A RevisionId from text or a message, with this client's tenant as the default
        ("" for a client with a token and no tenant: the daemon fills the credential's in)."""
        return to_revision_id(value, self.tenant)

    def resolve(self, value: IdLike, ready_only: bool = True) -> RevisionId:
        """The id with its generation: as given, or when it has none (``ns/res@rev``)
        the highest one among READY/DEGRADED revisions (every state unless
        `ready_only`) — weightctl's rule. Generation 0 when there is none.
        """
        rid = self.id(value)
        if rid.weight_generation:
            return rid
        states: List[int] = [] if ready_only else [
            ev.IMPORTING, ev.READY, ev.DEGRADED, ev.DELETING, ev.DELETED]
        token = ""
        while True:  # every page: weightctl stops at 1000, a long lineage has more
            page = self.list_revisions(tenant=rid.tenant, ns=rid.ns, resource=rid.resource,
                                       states=states, page_token=token, limit=1000)
            for view in page.revisions:
                if view.id.revision == rid.revision:
                    rid.weight_generation = max(rid.weight_generation, view.id.weight_generation)
            token = page.next_page_token
            if not token:
                return rid

    # _request (the request message from keyword fields) and _unary (timeout,
    # retries) are rpc.py's _Calls.

    # -------------------------------------------------------- WeightService

    def begin_import(self, request: Optional[pb.BeginImportRequest] = None, /, *,
                     timeout: Optional[float] = None, **fields: Any) -> pb.RevisionView:
        """BeginImport: a new IMPORTING revision (invisible until committed)."""
        return self._unary(self._weights.BeginImport,
                           self._request(pb.BeginImportRequest, request, fields), timeout)

    def commit_import(self, request: Optional[pb.CommitImportRequest] = None, /, *,
                      timeout: Optional[float] = None, **fields: Any) -> pb.RevisionView:
        """CommitImport: validates the group and publishes the revision (READY)."""
        return self._unary(self._weights.CommitImport,
                           self._request(pb.CommitImportRequest, request, fields), timeout)

    def abort_import(self, request: Optional[pb.AbortImportRequest] = None, /, *,
                     timeout: Optional[float] = None, **fields: Any) -> pb.AbortImportResponse:
        """AbortImport: an IMPORTING revision and its uploaded objects go away."""
        return self._unary(self._weights.AbortImport,
                           self._request(pb.AbortImportRequest, request, fields), timeout)

    def get_revision(self, request: Optional[pb.GetRevisionRequest] = None, /, *,
                     timeout: Optional[float] = None, **fields: Any) -> pb.RevisionView:
        """GetRevision: the view of one revision (hidden states only with include_hidden)."""
        return self._unary(self._weights.GetRevision,
                           self._request(pb.GetRevisionRequest, request, fields), timeout)

    def list_revisions(self, request: Optional[pb.ListRevisionsRequest] = None, /, *,
                       timeout: Optional[float] = None, **fields: Any) -> pb.ListRevisionsResponse:
        """ListRevisions: one page (limit 0 = 100, at most 1000)."""
        return self._unary(self._weights.ListRevisions,
                           self._request(pb.ListRevisionsRequest, request, fields), timeout)

    def update_policy(self, request: Optional[pb.UpdatePolicyRequest] = None, /, *,
                      timeout: Optional[float] = None, **fields: Any) -> pb.RevisionView:
        """UpdatePolicy on a READY/DEGRADED revision."""
        return self._unary(self._weights.UpdatePolicy,
                           self._request(pb.UpdatePolicyRequest, request, fields), timeout)

    def remove_revision(self, request: Optional[pb.RemoveRevisionRequest] = None, /, *,
                        timeout: Optional[float] = None, **fields: Any) -> pb.RemoveRevisionResponse:
        """RemoveRevision: BUSY while a lease or operation holds it, unless drain_timeout_ms."""
        return self._unary(self._weights.RemoveRevision,
                           self._request(pb.RemoveRevisionRequest, request, fields), timeout)

    def acquire_lease(self, request: Optional[pb.AcquireLeaseRequest] = None, /, *,
                      timeout: Optional[float] = None, **fields: Any) -> pb.Lease:
        """AcquireLease on a READY revision (a live lease of the same holder is returned)."""
        return self._unary(self._weights.AcquireLease,
                           self._request(pb.AcquireLeaseRequest, request, fields), timeout)

    def renew_lease(self, request: Optional[pb.RenewLeaseRequest] = None, /, *,
                    timeout: Optional[float] = None, **fields: Any) -> pb.Lease:
        """RenewLease: expiry = max(current, now + ttl_ms)."""
        return self._unary(self._weights.RenewLease,
                           self._request(pb.RenewLeaseRequest, request, fields), timeout)

    def release_lease(self, request: Optional[pb.ReleaseLeaseRequest] = None, /, *,
                      timeout: Optional[float] = None, **fields: Any) -> pb.ReleaseLeaseResponse:
        """ReleaseLease (idempotent)."""
        return self._unary(self._weights.ReleaseLease,
                           self._request(pb.ReleaseLeaseRequest, request, fields), timeout)

    def list_leases(self, request: Optional[pb.ListLeasesRequest] = None, /, *,
                    timeout: Optional[float] = None, **fields: Any) -> pb.ListLeasesResponse:
        """ListLeases: the live leases of one revision."""
        return self._unary(self._weights.ListLeases,
                           self._request(pb.ListLeasesRequest, request, fields), timeout)

    def revoke_lease(self, request: Optional[pb.RevokeLeaseRequest] = None, /, *,
                     timeout: Optional[float] = None, **fields: Any) -> pb.Lease:
        """RevokeLease (admin)."""
        return self._unary(self._weights.RevokeLease,
                           self._request(pb.RevokeLeaseRequest, request, fields), timeout)

    def migrate(self, request: Optional[pb.MigrateRequest] = None, /, *,
                timeout: Optional[float] = None, **fields: Any) -> pb.Operation:
        """Migrate: starts (or returns) the operation toward `target`; asynchronous."""
        return self._unary(self._weights.Migrate,
                           self._request(pb.MigrateRequest, request, fields), timeout)

    def get_operation(self, request: Optional[pb.GetOperationRequest] = None, /, *,
                      timeout: Optional[float] = None, **fields: Any) -> pb.Operation:
        """GetOperation: progress and state of an operation (terminal ones stay queryable)."""
        return self._unary(self._weights.GetOperation,
                           self._request(pb.GetOperationRequest, request, fields), timeout)

    def cancel_operation(self, request: Optional[pb.CancelOperationRequest] = None, /, *,
                         timeout: Optional[float] = None, **fields: Any) -> pb.Operation:
        """CancelOperation: ends it as CANCELLED at the next unit boundary."""
        return self._unary(self._weights.CancelOperation,
                           self._request(pb.CancelOperationRequest, request, fields), timeout)

    def reconcile(self, request: Optional[pb.ReconcileRequest] = None, /, *,
                  timeout: Optional[float] = None, **fields: Any) -> pb.ReconcileResponse:
        """Reconcile: a reconciler round now, or with dry_run what it would decide."""
        return self._unary(self._weights.Reconcile,
                           self._request(pb.ReconcileRequest, request, fields), timeout)

    def begin_upsert(self, request: Optional[pb.BeginUpsertRequest] = None, /, *,
                     timeout: Optional[float] = None, **fields: Any) -> pb.UpsertClaim:
        """BeginUpsert: claims the lineage for a higher generation."""
        return self._unary(self._weights.BeginUpsert,
                           self._request(pb.BeginUpsertRequest, request, fields), timeout)

    def commit_upsert(self, request: Optional[pb.CommitUpsertRequest] = None, /, *,
                      timeout: Optional[float] = None, **fields: Any) -> pb.RevisionView:
        """CommitUpsert: commits the target; the base retires."""
        return self._unary(self._weights.CommitUpsert,
                           self._request(pb.CommitUpsertRequest, request, fields), timeout)

    def abort_upsert(self, request: Optional[pb.AbortUpsertRequest] = None, /, *,
                     timeout: Optional[float] = None, **fields: Any) -> pb.UpsertClaim:
        """AbortUpsert: gives the lineage's claim up."""
        return self._unary(self._weights.AbortUpsert,
                           self._request(pb.AbortUpsertRequest, request, fields), timeout)

    def get_lineage(self, request: Optional[pb.GetLineageRequest] = None, /, *,
                    timeout: Optional[float] = None, **fields: Any) -> pb.Lineage:
        """GetLineage: the watermark and the claim, if any."""
        return self._unary(self._weights.GetLineage,
                           self._request(pb.GetLineageRequest, request, fields), timeout)

    def history(self, request: Optional[pb.HistoryRequest] = None, /, *,
                timeout: Optional[float] = None, **fields: Any) -> pb.HistoryResponse:
        """History: one page of a revision's events in journal order."""
        return self._unary(self._weights.History,
                           self._request(pb.HistoryRequest, request, fields), timeout)

    def open_local(self, request: Optional[pb.OpenLocalRequest] = None, /, *,
                   timeout: Optional[float] = None, **fields: Any) -> pb.OpenLocalResponse:
        """OpenLocal: the replica files of a leased revision, for readers on the daemon's host."""
        return self._unary(self._weights.OpenLocal,
                           self._request(pb.OpenLocalRequest, request, fields), timeout)

    def watch(self, request: Optional[pb.WatchRequest] = None, /, *,
              timeout: Optional[float] = None, **fields: Any) -> "_Stream[ev.Envelope]":
        """Watch: one raw stream of envelopes from `from_seq` (0 = from now).

        It ends with an error when the connection breaks or after `timeout`
        (default `watch_timeout`); `weightd.watch()` resumes by itself.
        """
        req = self._request(pb.WatchRequest, request, fields)
        call = self._weights.Watch(req, timeout=timeout or self.watch_timeout,
                                   metadata=self._metadata)
        return _Stream(call, self.address, self.secure)

    # ObjectService (put_object, get_object_to, get_object, stat_object, …):
    # objects.py's _ObjectService.

    # --------------------------------------------------------- AdminService

    def status(self, *, timeout: Optional[float] = None) -> pb.StatusResponse:
        """Status: tier usage, journal position, counts."""
        return self._unary(self._admin.Status, pb.StatusRequest(), timeout)

    def snapshot(self, *, timeout: Optional[float] = None) -> pb.SnapshotResponse:
        """Snapshot: write a whole-state snapshot now (admin)."""
        return self._unary(self._admin.Snapshot, pb.SnapshotRequest(), timeout)

    def promote(self, *, force: bool = False,
                timeout: Optional[float] = None) -> pb.PromoteResponse:
        """Promote (SPEC §11, admin): the standby this client talks to becomes the
        leader at the next epoch; `force` also while its leader still streams to it.
        It answers once accepted; the standby then restarts as the leader."""
        return self._unary(self._admin.Promote, pb.PromoteRequest(force=force), timeout)


__all__ = ["Client", "DEFAULT_ADDRESS", "MAX_CHUNK_BYTES", "enum_value", "new_request_id",
           "tls_credentials"]
