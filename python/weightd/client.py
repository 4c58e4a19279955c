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
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Any, Callable, Iterable, Iterator, List, Mapping, Optional, Tuple, Type, TypeVar, Union

import grpc
from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from ._proto import events_pb2 as ev
from ._proto import weightd_pb2 as pb
from ._proto import weightd_pb2_grpc as pb_grpc
from .errors import InvalidArgument, from_rpc_error, is_transport_failure
from .ids import DEFAULT_TENANT, IdLike, RevisionId, to_revision_id

#: The daemon's default gRPC address (SPEC §8).
DEFAULT_ADDRESS = "127.0.0.1:7070"
#: The largest Put chunk the daemon accepts (api/common/wire.hpp).
MAX_CHUNK_BYTES = 4 << 20

M = TypeVar("M", bound=Message)


def new_request_id(prefix: str = "python") -> str:
    """A request id no other call will have: ``<prefix>-<16 hex digits>``."""
    return f"{prefix}-{secrets.token_hex(8)}"


def enum_value(enum: EnumDescriptor, value: Union[int, str]) -> int:
    """An enum value from its number, full name ("RESIDENCY_COLD") or short name ("cold")."""
    if isinstance(value, int):
        return value
    upper = value.upper()
    if upper in enum.values_by_name:
        return enum.values_by_name[upper].number
    for name, v in enum.values_by_name.items():
        if name.endswith("_" + upper):
            return v.number
    names = ", ".join(enum.values_by_name)
    raise InvalidArgument.local(f"'{value}' is not a {enum.name} (one of {names})")


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


class _Stream(Iterator[M]):
    """A server stream whose failures come out as WeightdError; cancel() ends it."""

    def __init__(self, call: Any, address: str, tls: bool = False):
        self._call = call
        self._address = address
        self._tls = tls

    def __iter__(self) -> "_Stream[M]":
        return self

    def __next__(self) -> M:
        try:
            return next(self._call)
        except grpc.RpcError as e:
            raise from_rpc_error(e, self._address, self._tls) from e

    def cancel(self) -> None:
        """Ends the stream; the daemon sees the call cancelled."""
        self._call.cancel()


class Client:
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

    def _set(self, message: Message, name: str, value: Any) -> None:
        field = message.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            raise TypeError(f"{message.DESCRIPTOR.name} has no field {name!r}")
        if field.label == FieldDescriptor.LABEL_REPEATED:
            target = getattr(message, name)
            for item in value:
                if field.message_type is not None:
                    self._assign(target.add(), field, item)
                else:
                    target.append(self._scalar(field, item))
        elif field.message_type is not None:
            self._assign(getattr(message, name), field, value)
        else:
            setattr(message, name, self._scalar(field, value))

    def _assign(self, target: Message, field: FieldDescriptor, value: Any) -> None:
        if field.message_type.full_name == RevisionId.DESCRIPTOR.full_name and isinstance(value, str):
            value = self.id(value)
        if isinstance(value, Message):
            target.CopyFrom(value)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                self._set(target, k, v)
        else:
            raise TypeError(f"field {field.name} takes a {field.message_type.name}, "
                            f"not {type(value).__name__}")

    @staticmethod
    def _scalar(field: FieldDescriptor, value: Any) -> Any:
        if field.enum_type is not None:
            return enum_value(field.enum_type, value)
        return value

    def _request(self, cls: Type[M], request: Optional[M], fields: Mapping[str, Any]) -> M:
        req = cls()
        if request is not None:
            if fields:
                raise TypeError("pass the request message or its fields, not both")
            if not isinstance(request, cls):
                raise TypeError(f"expected a {cls.__name__}, not {type(request).__name__}")
            req.CopyFrom(request)
        for name, value in fields.items():
            self._set(req, name, value)
        names = req.DESCRIPTOR.fields_by_name
        if "tenant" in names and not getattr(req, "tenant"):
            setattr(req, "tenant", self.tenant)
        if "request_id" in names and not getattr(req, "request_id"):
            setattr(req, "request_id", new_request_id())
        for field in req.DESCRIPTOR.fields:  # ids: the client's tenant when empty
            if (field.message_type is not None and
                    field.message_type.full_name == RevisionId.DESCRIPTOR.full_name and
                    field.label != FieldDescriptor.LABEL_REPEATED and req.HasField(field.name)):
                rid = getattr(req, field.name)
                rid.tenant = rid.tenant or self.tenant
        return req

    def _unary(self, method: Callable[..., M], request: Message, timeout: Optional[float]) -> M:
        delay = 0.1
        for attempt in range(1, self.attempts + 1):
            try:
                return method(request, timeout=timeout or self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                error, cause = from_rpc_error(e, self.address, self.secure), e
            # A timeout already waited its full length: only "nobody there" is retried.
            if not is_transport_failure(error) or error.code == "DEADLINE_EXCEEDED" \
                    or attempt == self.attempts:
                raise error from cause
            time.sleep(delay)
            delay *= 4
        raise AssertionError("unreachable")

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

    # -------------------------------------------------------- ObjectService

    def put_object(self, data: Union[bytes, bytearray, memoryview, Iterable[bytes]] = b"",
                   header: Optional[pb.PutHeader] = None, /, *,
                   timeout: Optional[float] = None, **fields: Any) -> pb.ObjectInfo:
        """Put: the header (a PutHeader, or its fields as keywords), then `data`
        in chunks of at most 4 MiB.

        `data` is bytes, or an iterable of byte chunks (then give `size` in
        the header: the daemon reserves it before the first byte). An
        exception raised by the iterable ends the put and is re-raised here.
        """
        h = self._request(pb.PutHeader, header, fields)
        if isinstance(data, (bytes, bytearray, memoryview)):
            view = memoryview(data).cast("B")
            if not h.size:
                h.size = len(view)
            chunks: Iterable[Any] = (view[i:i + MAX_CHUNK_BYTES]
                                     for i in range(0, len(view), MAX_CHUNK_BYTES))
        else:
            chunks = data
        failure: List[BaseException] = []

        def requests() -> Iterator[pb.PutRequest]:
            yield pb.PutRequest(header=h)
            try:
                for chunk in chunks:
                    for i in range(0, len(chunk), MAX_CHUNK_BYTES):
                        yield pb.PutRequest(chunk=bytes(chunk[i:i + MAX_CHUNK_BYTES]))
            except Exception as e:  # gRPC would only log it: keep it for the caller
                failure.append(e)
                raise

        try:
            response = self._objects.Put(requests(), timeout=timeout or self.stream_timeout,
                                         metadata=self._metadata)
        except grpc.RpcError as e:
            if failure:
                raise failure[0] from e
            raise from_rpc_error(e, self.address, self.secure) from e
        return response.object

    def get_object_to(self, sink: Callable[[bytes], Any],
                      request: Optional[pb.GetRequest] = None, /, *,
                      timeout: Optional[float] = None, **fields: Any) -> pb.ObjectInfo:
        """Get, streaming: `sink` is called with each chunk; returns the object's info.

        An exception raised by `sink` cancels the call and is re-raised.
        """
        req = self._request(pb.GetRequest, request, fields)
        call = self._objects.Get(req, timeout=timeout or self.stream_timeout,
                                 metadata=self._metadata)
        info = pb.ObjectInfo()
        try:
            for msg in call:
                if msg.HasField("info"):
                    info = msg.info
                else:
                    sink(msg.chunk)
        except grpc.RpcError as e:
            raise from_rpc_error(e, self.address, self.secure) from e
        except BaseException:
            call.cancel()
            raise
        return info

    def get_object(self, request: Optional[pb.GetRequest] = None, /, *,
                   timeout: Optional[float] = None, **fields: Any) -> Tuple[pb.ObjectInfo, bytes]:
        """Get: the object's info and its bytes (in memory; see get_object_to)."""
        parts: List[bytes] = []
        info = self.get_object_to(parts.append, request, timeout=timeout, **fields)
        return info, b"".join(parts)

    def stat_object(self, request: Optional[pb.StatRequest] = None, /, *,
                    timeout: Optional[float] = None, **fields: Any) -> pb.ObjectInfo:
        """Stat: an object's info."""
        return self._unary(self._objects.Stat, self._request(pb.StatRequest, request, fields),
                           timeout)

    def remove_object(self, request: Optional[pb.RemoveRequest] = None, /, *,
                      timeout: Optional[float] = None, **fields: Any) -> pb.RemoveResponse:
        """Remove one object (MANAGED_OBJECT for a revision's member)."""
        return self._unary(self._objects.Remove, self._request(pb.RemoveRequest, request, fields),
                           timeout)

    def batch_remove_objects(self, request: Optional[pb.BatchRemoveRequest] = None, /, *,
                             timeout: Optional[float] = None,
                             **fields: Any) -> pb.BatchRemoveResponse:
        """BatchRemove: per-key results."""
        return self._unary(self._objects.BatchRemove,
                           self._request(pb.BatchRemoveRequest, request, fields), timeout)

    def remove_all_objects(self, request: Optional[pb.RemoveAllRequest] = None, /, *,
                           timeout: Optional[float] = None, **fields: Any) -> pb.RemoveAllResponse:
        """RemoveAll under a prefix (managed members are skipped)."""
        return self._unary(self._objects.RemoveAll,
                           self._request(pb.RemoveAllRequest, request, fields), timeout)

    def evict(self, request: Optional[pb.EvictRequest] = None, /, *,
              timeout: Optional[float] = None, **fields: Any) -> pb.EvictResponse:
        """Evict (admin): free HOT bytes down to target_ratio."""
        return self._unary(self._objects.Evict, self._request(pb.EvictRequest, request, fields),
                           timeout)

    def list_objects(self, request: Optional[pb.ListObjectsRequest] = None, /, *,
                     timeout: Optional[float] = None, **fields: Any) -> pb.ListObjectsResponse:
        """List: one page of objects under a prefix."""
        return self._unary(self._objects.List,
                           self._request(pb.ListObjectsRequest, request, fields), timeout)

    # --------------------------------------------------------- AdminService

    def status(self, *, timeout: Optional[float] = None) -> pb.StatusResponse:
        """Status: tier usage, journal position, counts."""
        return self._unary(self._admin.Status, pb.StatusRequest(), timeout)

    def snapshot(self, *, timeout: Optional[float] = None) -> pb.SnapshotResponse:
        """Snapshot: write a whole-state snapshot now (admin)."""
        return self._unary(self._admin.Snapshot, pb.SnapshotRequest(), timeout)


__all__ = ["Client", "DEFAULT_ADDRESS", "MAX_CHUNK_BYTES", "enum_value", "new_request_id",
           "tls_credentials"]
