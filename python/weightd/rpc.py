"""How a `Client` method becomes a gRPC call, and the pieces of a call the other
modules share.

`_Calls` (a base of `Client`): the request message built from the message or
its keyword fields (a revision id as text, an enum by name, a message field as
a dict; ``tenant``, ``request_id`` and the ids' tenants filled in when empty),
then one unary call with a finite timeout, retried with backoff while it
reaches no daemon. Also: request ids, enum values by name, and `_Stream`, a
server stream whose failures are `WeightdError` (errors.py).
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Callable, Iterator, Mapping, Optional, Type, TypeVar, Union

import grpc
from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from .errors import InvalidArgument, from_rpc_error, is_transport_failure
from .ids import RevisionId

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


class _Calls:
    """Request building and unary calls with retries, for `Client`.

    Uses what Client sets up: `id()`, `tenant`, `timeout`, `attempts`,
    `address`, `secure` and `_metadata`.
    """

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


__all__ = ["enum_value", "new_request_id"]
