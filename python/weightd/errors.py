"""Typed errors (SPEC §5).

Every failure the package reports is a `WeightdError`. The daemon sends its
domain code in the trailing metadata `weightd-error` (api/common/grpc_status.cpp);
that code picks the subclass, so a caller writes `except weightd.Busy:` rather
than comparing gRPC statuses (BUSY and DURABILITY_FAILED are both UNAVAILABLE
on the wire, CONFLICT and OBJECT_ALREADY_EXISTS both ALREADY_EXISTS).

A status without that trailer was made by gRPC itself: a daemon that does not
answer is `Unavailable` (or `DeadlineExceeded`), which is what weightctl calls
"daemon unreachable".
"""

from __future__ import annotations

from typing import Dict, Optional, Type

import grpc

#: The trailing metadata key that carries the domain code.
ERROR_METADATA = "weightd-error"


class WeightdError(Exception):
    """A weightd failure.

    Attributes:
        code: the domain code, e.g. ``"NOT_FOUND"`` (SPEC §5); for errors gRPC
            made without the daemon, the gRPC status name (``"UNAVAILABLE"``).
        message: what happened and what to do, as the daemon wrote it.
        grpc_status: the `grpc.StatusCode` of the call, or None for errors
            raised on the client side before or after any call (a directory
            that cannot be read, a sha256 mismatch on export).
    """

    #: The domain code of the class (the base class has none of its own).
    CODE = ""

    def __init__(self, code: str, message: str, grpc_status: Optional[grpc.StatusCode] = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.grpc_status = grpc_status

    @classmethod
    def local(cls, message: str) -> "WeightdError":
        """The error of this class raised by the client itself (no gRPC status)."""
        return cls(cls.CODE, message, None)


# One class per domain code of events/status.hpp, in its order.
class InvalidArgument(WeightdError):
    """Malformed request; the message names the field."""
    CODE = "INVALID_ARGUMENT"


class NotFound(WeightdError):
    """Unknown revision, lease, operation, object, group or manifest."""
    CODE = "NOT_FOUND"


class Conflict(WeightdError):
    """Exists with other parameters, wrong state for the action, mismatched group."""
    CODE = "CONFLICT"


class StaleGeneration(WeightdError):
    """expected_metadata_generation is not current: re-read, retry."""
    CODE = "STALE_GENERATION"


class NotReady(WeightdError):
    """The revision's state cannot accept this (e.g. a lease on IMPORTING)."""
    CODE = "NOT_READY"


class Busy(WeightdError):
    """A lease or operation blocks it; retry later (the message names the blockers)."""
    CODE = "BUSY"


class LeaseExpired(WeightdError):
    """Renew of an expired lease."""
    CODE = "LEASE_EXPIRED"


class PolicyUnsatisfiable(WeightdError):
    """The policy cannot be met (PINNED, MIXED with fewer than 2 units)."""
    CODE = "POLICY_UNSATISFIABLE"


class GenerationExhausted(WeightdError):
    """A generation counter cannot advance."""
    CODE = "GENERATION_EXHAUSTED"


class DurabilityFailed(WeightdError):
    """The journal could not persist; nothing was published. Re-read before retrying."""
    CODE = "DURABILITY_FAILED"


class ManagedObject(WeightdError):
    """Generic remove of a managed revision's member."""
    CODE = "MANAGED_OBJECT"


class ObjectHasLease(WeightdError):
    """Non-forced remove of an object under a read lease."""
    CODE = "OBJECT_HAS_LEASE"


class ObjectAlreadyExists(WeightdError):
    """Put of a live key."""
    CODE = "OBJECT_ALREADY_EXISTS"


class NoAvailableSpace(WeightdError):
    """The tier is full even after eviction."""
    CODE = "NO_AVAILABLE_SPACE"


class Unauthenticated(WeightdError):
    """Missing or unknown token."""
    CODE = "UNAUTHENTICATED"


class PermissionDenied(WeightdError):
    """Role too low, or another tenant's data."""
    CODE = "PERMISSION_DENIED"


class DataLoss(WeightdError):
    """Stored bytes or records failed their checksum (also: a manifest that is unusable)."""
    CODE = "DATA_LOSS"


class Internal(WeightdError):
    """A bug or an unexpected system error."""
    CODE = "INTERNAL"


class ResourceExhausted(WeightdError):
    """A per-client or global limit is reached (streams, a tenant's share); the message names it."""
    CODE = "RESOURCE_EXHAUSTED"


class Unimplemented(WeightdError):
    """An RPC this daemon does not serve (yet)."""
    CODE = "UNIMPLEMENTED"


class NotLeader(WeightdError):
    """A standby answered (SPEC §11): writes go to its leader, whom the message names."""
    CODE = "NOT_LEADER"


# Not domain codes: gRPC's own statuses when no daemon answered.
class Unavailable(WeightdError):
    """The daemon cannot be reached (nothing listens there, or the connection broke)."""
    CODE = "UNAVAILABLE"


class DeadlineExceeded(Unavailable):
    """No answer before the call's timeout: a daemon too slow counts as unreachable."""
    CODE = "DEADLINE_EXCEEDED"


_BY_CODE: Dict[str, Type[WeightdError]] = {
    cls.CODE: cls
    for cls in (InvalidArgument, NotFound, Conflict, StaleGeneration, NotReady, Busy,
                LeaseExpired, PolicyUnsatisfiable, GenerationExhausted, DurabilityFailed,
                ManagedObject, ObjectHasLease, ObjectAlreadyExists, NoAvailableSpace,
                Unauthenticated, PermissionDenied, DataLoss, Internal, ResourceExhausted,
                Unimplemented, NotLeader, Unavailable, DeadlineExceeded)
}

# Statuses gRPC makes on its own, the same way api/common/grpc_status.cpp reads them.
_BY_GRPC_STATUS: Dict[grpc.StatusCode, Type[WeightdError]] = {
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.DATA_LOSS: DataLoss,
}


def domain_code(error: grpc.RpcError) -> Optional[str]:
    """The `weightd-error` trailer of a failed call, None when the daemon sent none."""
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in trailers or ():
        if key == ERROR_METADATA:
            return value.decode() if isinstance(value, bytes) else value
    return None


def from_rpc_error(error: grpc.RpcError, address: str = "", tls: bool = False) -> WeightdError:
    """The typed error for a failed gRPC call (`tls`: the channel was TLS, which an
    unreachable daemon's message then mentions: a refused handshake looks the same)."""
    status = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else None
    if not details:  # gRPC's own UNIMPLEMENTED has no message at all
        details = ("this daemon does not serve the RPC (an older weightd?)"
                   if status == grpc.StatusCode.UNIMPLEMENTED
                   else f"gRPC status {status.name} without a message")
    code = domain_code(error)
    if code is not None:
        return _BY_CODE.get(code, WeightdError)(code, details, status)
    cls = _BY_GRPC_STATUS.get(status, WeightdError)
    if issubclass(cls, Unavailable):
        where = f" at {address}" if address else ""
        details = (f"weightd is unreachable or too slow{where} ({details}); is the daemon "
                   "running there? Point the client at it with address= or WEIGHTD_ADDRESS")
        if tls:
            details += ("; over TLS, also check tls_ca_file (the CA of the daemon's "
                        "certificate) and, for a daemon with --tls-client-ca-file, "
                        "tls_cert_file and tls_key_file")
    return cls(cls.CODE or status.name, details, status)


def is_transport_failure(error: WeightdError) -> bool:
    """True when no daemon answered: the call may be sent again unchanged.

    Safe for every RPC (SPEC §4): mutations are fenced by
    expected_metadata_generation and a retry is recognised by its digest.
    """
    return isinstance(error, Unavailable)
