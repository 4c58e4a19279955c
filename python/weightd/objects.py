"""The ObjectService methods of `Client`: Put, Get, Stat, Remove, BatchRemove,
RemoveAll, Evict and List → put_object, get_object_to/get_object, stat_object,
remove_object, batch_remove_objects, remove_all_objects, evict, list_objects.

They are `_ObjectService`, a base of `Client`; the request building, timeouts
and retries are rpc.py's `_Calls`, as for every other method.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple, Union

import grpc

from ._proto import weightd_pb2 as pb
from .errors import from_rpc_error

#: The largest Put chunk the daemon accepts (api/common/wire.hpp).
MAX_CHUNK_BYTES = 4 << 20


class _ObjectService:
    """ObjectService's methods of `Client` (they use its ObjectService stub, its
    `stream_timeout` and `_Calls`'s `_request` and `_unary`)."""

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


__all__ = ["MAX_CHUNK_BYTES"]
