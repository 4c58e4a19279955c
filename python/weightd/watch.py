"""A Watch that survives broken streams (SPEC §4 History/Watch).

The daemon delivers every event in order and gap-free, or ends the stream
with an error — never a silent gap. So a watcher that remembers the last
global_seq it handed out can always reconnect at last + 1 and miss nothing:
`Watch` does that by itself, with backoff, when the stream breaks because the
daemon restarted or the connection dropped (UNAVAILABLE), the daemon is busy
(BUSY, RESOURCE_EXHAUSTED: too many streams, or this reader stalled), or a
stream reached its finite timeout. Events it already handed out are skipped
if a server repeats them, so there is no duplicate either.

"From now" (from_seq=0) is pinned when `Watch` is created: the journal's
position is read once (AdminService.Status) and the stream starts after it,
so even a break before the first event cannot skip one.
"""

from __future__ import annotations

import time
from typing import Iterator, Optional, Sequence

import grpc

from ._proto import events_pb2 as ev
from .client import Client, _Stream
from .errors import (Busy, DurabilityFailed, ResourceExhausted, Unavailable, WeightdError)

# Errors after which the same position can simply be asked for again.
_RESUMABLE = (Unavailable, Busy, ResourceExhausted, DurabilityFailed)
# gRPC statuses of a stream cut without a weightd code (a daemon going down
# cancels its calls; an abrupt reset is INTERNAL or UNKNOWN "stream removed").
_CUT = (grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)


class Watch(Iterator[ev.Envelope]):
    """An endless iterator of journal envelopes that resumes after breaks.

    Args:
        client: the daemon to watch.
        from_seq: the first global_seq wanted (inclusive); 0 = from now.
        stream_prefix: only streams starting with it ("revision|default/llama"); "" = all
            of the caller's tenant.
        types: only these event types, by catalog name ("lease_granted", ...).
        give_up_after: seconds of failing to reconnect after which the last
            error is raised (None = keep trying).
        max_backoff: the longest wait between two reconnects, in seconds.

    `next_seq` is where it would resume. `close()` (or leaving a `with`
    block) ends it; iteration then stops.
    """

    def __init__(self, client: Client, from_seq: int = 0, stream_prefix: str = "",
                 types: Sequence[str] = (), *, give_up_after: Optional[float] = None,
                 max_backoff: float = 2.0):
        self.client = client
        self.stream_prefix = stream_prefix
        self.types = list(types)
        self.give_up_after = give_up_after
        self.max_backoff = max_backoff
        self.next_seq = from_seq or client.status().journal_seq + 1
        self.reconnects = 0  # streams opened after the first, for the curious
        self._stream: Optional[_Stream[ev.Envelope]] = None
        self._closed = False

    def __iter__(self) -> "Watch":
        return self

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ends the watch; the stream in progress is cancelled."""
        self._closed = True
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None

    def _resumable(self, error: WeightdError) -> bool:
        return isinstance(error, _RESUMABLE) or (
            type(error) is WeightdError and error.grpc_status in _CUT)

    def __next__(self) -> ev.Envelope:
        backoff, failing_since, opened_at = 0.05, None, time.monotonic()
        while not self._closed:
            if self._stream is None:
                if failing_since is not None:
                    self.reconnects += 1
                opened_at = time.monotonic()
                self._stream = self.client.watch(from_seq=self.next_seq,
                                                 stream_prefix=self.stream_prefix,
                                                 types=self.types)
            try:
                envelope = next(self._stream)
            except StopIteration:
                envelope, error = None, None  # ended without a status: ask again
            except WeightdError as e:
                envelope, error = None, e
            if envelope is not None:
                if envelope.global_seq < self.next_seq:
                    continue  # already handed out before a reconnect
                self.next_seq = envelope.global_seq + 1
                return envelope
            self._stream = None
            if self._closed:
                break
            if error is not None and not self._resumable(error):
                raise error
            now = time.monotonic()
            if now - opened_at > 1.0:  # a stream that lived (and timed out) was healthy
                backoff, failing_since = 0.05, None
            failing_since = failing_since if failing_since is not None else now
            if (self.give_up_after is not None and error is not None and
                    now - failing_since > self.give_up_after):
                raise error
            time.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)
        raise StopIteration


__all__ = ["Watch"]
