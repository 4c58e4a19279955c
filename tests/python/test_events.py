"""History and Watch (SPEC §4): a revision's events in order; a watch that
resumes across a daemon restart with no gap and no duplicate.
"""

import queue
import threading

import weightd


def payload(envelope):
    return envelope.WhichOneof("payload")


class Collector:
    """Runs a Watch on a thread so that a test waits for events with a timeout."""

    def __init__(self, w: weightd.Watch):
        self.watch = w
        self.events = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for envelope in self.watch:
                self.events.put(envelope)
        except Exception as e:  # handed to the test, which raises it
            self.events.put(e)

    def until(self, predicate, timeout=15.0):
        """Every envelope up to and including the first that matches."""
        got = []
        while True:
            item = self.events.get(timeout=timeout)
            if isinstance(item, Exception):
                raise item
            got.append(item)
            if predicate(item):
                return got

    def close(self):
        self.watch.close()
        self.thread.join(timeout=5)


def committed(resource):
    return lambda e: payload(e) == "import_committed" and e.import_committed.id.resource == resource


def test_history_returns_the_revision_s_events_in_order(client, rid, model_dir):
    view = weightd.weight_put(model_dir, rid, client=client)
    with weightd.weight_get(rid, client=client):
        pass
    weightd.weight_remove(rid, client=client)
    events = weightd.history(view.id, client=client)
    kinds = [payload(e) for e in events]
    assert kinds[:4] == ["import_begun", "import_committed", "lease_granted", "lease_released"]
    assert "removal_started" in kinds[4:]
    assert {e.stream for e in events} == {"revision|" + weightd.format_id(view.id)}
    assert [e.stream_seq for e in events] == list(range(1, len(events) + 1))
    seqs = [e.global_seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # Paging gives the same events.
    first = client.history(id=view.id, limit=2)
    assert [e.global_seq for e in first.events] == seqs[:2] and first.next_page_token


def test_watch_resumes_across_a_daemon_restart_without_gap_or_duplicate(fresh_daemon, model_dir):
    client = fresh_daemon.client()
    prefix = "revision|watched/"
    w = weightd.watch(stream_prefix=prefix, give_up_after=30, client=client)
    start = w.next_seq
    collector = Collector(w)
    try:
        weightd.weight_put(model_dir, "watched/a@main", client=client)
        before = collector.until(committed("a"))
        fresh_daemon.restart()  # the stream breaks; the watch reconnects by itself
        weightd.weight_put(model_dir, "watched/b@main", client=client)
        after = collector.until(committed("b"))
    finally:
        collector.close()
    seen = before + after
    seqs = [e.global_seq for e in seen]
    assert seqs == sorted(set(seqs)), "a duplicate or an out-of-order event"
    assert w.reconnects >= 1
    # No gap: a watch over the same range after the fact sees exactly these events.
    replay = Collector(weightd.watch(start, prefix, give_up_after=30, client=client))
    try:
        again = replay.until(lambda e: e.global_seq == seqs[-1])
    finally:
        replay.close()
    assert [e.global_seq for e in again] == seqs
    assert [payload(e) for e in seen][:2] == ["import_begun", "import_committed"]


def test_watch_filters_by_event_type(fresh_daemon, model_dir):
    client = fresh_daemon.client()
    collector = Collector(weightd.watch(types=["lease_granted"], client=client))
    try:
        weightd.weight_put(model_dir, "default/m@main", client=client)
        with weightd.weight_get("default/m@main", client=client) as rev:
            got = collector.until(lambda e: True)
        assert [payload(e) for e in got] == ["lease_granted"]
        assert got[0].lease_granted.lease_id == rev.lease.lease_id
    finally:
        collector.close()
