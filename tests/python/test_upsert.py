"""Lineage replacement (SPEC §4 upsert) through `weight_upsert` and the client's
BeginUpsert / CommitUpsert / AbortUpsert / GetLineage, against a real daemon.

The story these tests tell is a training loop's: a new generation replaces
the one readers use; readers inside their `with weightd.weight_get(...)`
block keep reading the old bytes, new readers get the new generation, and
the old one is deleted once its last lease ends.
"""

import shutil
import time

import pytest

import weightd
from weightd import events_pb2 as ev
from weightd import transfer
from weightd import weightd_pb2 as pb

from conftest import tree


def lineage(client, rid):
    """GetLineage of the lineage `rid` (any #generation ignored)."""
    r = weightd.parse_id(rid)
    return client.get_lineage(tenant=r.tenant, ns=r.ns, resource=r.resource, revision=r.revision)


def wait_until(condition, timeout=5.0, what="the condition"):
    """Polls `condition()` until it returns something true; fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def completed(client, rid):
    """Waits until the lineage's claim is COMPLETED; returns the Lineage."""
    def done():
        answer = lineage(client, rid)
        return answer if answer.claim.phase == "COMPLETED" else None
    return wait_until(done, what="the claim's completion")


def availability(client, rid):
    return weightd.weight_get_metadata(rid, include_hidden=True, client=client).availability


def object_keys(client, prefix):
    return [o.key for o in client.list_objects(prefix=prefix, limit=1000).objects]


def changed_copy(model_dir, tmp_path):
    """The model directory with new contents in two of its files (the next checkpoint)."""
    new = tmp_path / "model-next"
    shutil.copytree(model_dir, new, symlinks=True)
    (new / "config.json").write_text('{"hidden_size": 16}\n')
    (new / "tokenizer" / "vocab.txt").write_bytes(bytes(reversed(range(256))) * 40)
    return new


def prefix_of(view):
    """The object key prefix of a revision's files and manifest."""
    return view.manifest.manifest_key[: -len("manifest")]


# ------------------------------------------------------------ PUT_FIRST

def test_a_training_loop_replaces_a_generation_its_readers_still_hold(
        client, rid, model_dir, tmp_path):
    base = weightd.weight_put(model_dir, rid, client=client)
    base_id = weightd.format_id(base.id)
    assert base_id == rid + "#1"
    old = tree(model_dir)
    new_dir = changed_copy(model_dir, tmp_path)
    new = tree(new_dir)

    with weightd.weight_get(base_id, client=client) as reader:
        assert reader.read("config.json") == old["config.json"]

        view = weightd.weight_upsert(new_dir, base_id, client=client)
        assert view.availability == ev.READY
        assert weightd.format_id(view.id) == rid + "#2"

        # New readers of the lineage get the new generation and its bytes.
        with weightd.weight_get(rid, client=client) as latest:
            assert latest.id.weight_generation == 2
            assert {p: latest.read(p) for p in latest.files()} == new

        # The reader that holds the base still reads its bytes, also files it
        # had not touched before the upsert.
        assert reader.read("config.json") == old["config.json"]
        assert reader.read("tokenizer/vocab.txt") == old["tokenizer/vocab.txt"]
        assert {p: reader.read(p) for p in reader.files()} == old

        # The base retires: no new lease, its lease still renews, no policy change.
        retiring = client.get_revision(id=base_id)
        assert retiring.availability == ev.READY
        assert retiring.active_lease_count == 1
        claim = lineage(client, rid).claim
        assert retiring.retired_by == claim.request_id != ""
        assert (claim.base_generation, claim.target_generation, claim.mode) == (
            1, 2, pb.PUT_FIRST)
        assert claim.phase == "RETIRING_BASE"
        with pytest.raises(weightd.NotReady):
            with weightd.weight_get(base_id, client=client):
                pass
        renewed = client.renew_lease(lease_id=reader.lease.lease_id, ttl_ms=30_000)
        assert renewed.lease_id == reader.lease.lease_id
        with pytest.raises(weightd.Busy):
            weightd.weight_update_policy(base_id, "COLD", client=client)
        with pytest.raises(weightd.Busy):
            weightd.weight_migrate(base_id, "COLD", client=client)
        assert weightd.weight_get_metadata(base_id, include_hidden=True,
                                           client=client).availability == ev.READY

    # The reader is gone: the base is deleted and the claim completes.
    wait_until(lambda: availability(client, base_id) == ev.DELETED, what="the base's deletion")
    done = completed(client, rid)
    assert done.watermark == 2
    assert done.claim.request_id == claim.request_id
    assert object_keys(client, prefix_of(base)) == []
    assert weightd.weight_get_metadata(rid, client=client).id.weight_generation == 2


def test_weight_upsert_of_an_unleased_base_completes_and_moves_the_watermark(
        client, rid, model_dir, tmp_path):
    weightd.weight_put(model_dir, rid, client=client)
    assert lineage(client, rid).watermark == 1
    # Without #generation the base is the highest READY one, the target the next.
    view = weightd.weight_upsert(changed_copy(model_dir, tmp_path), rid, client=client)
    assert view.id.weight_generation == 2
    assert lineage(client, rid).watermark == 2
    completed(client, rid)
    assert availability(client, rid + "#1") == ev.DELETED
    assert [v.id.weight_generation for v in weightd.weight_list(
        resource=view.id.resource, client=client)] == [2]


def test_weight_upsert_takes_an_explicit_target_generation(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    view = weightd.weight_upsert(model_dir, rid + "#1", target_generation=7, client=client)
    assert view.id.weight_generation == 7
    assert lineage(client, rid).watermark == 7


# --------------------------------------------------------- DELETE_FIRST

def test_delete_first_deletes_an_unheld_base_then_imports_the_target(
        client, rid, model_dir, tmp_path):
    base = weightd.weight_put(model_dir, rid, client=client)
    new_dir = changed_copy(model_dir, tmp_path)
    view = weightd.weight_upsert(new_dir, rid + "#1", mode="DELETE_FIRST", client=client)
    assert view.availability == ev.READY
    assert view.id.weight_generation == 2
    assert availability(client, rid + "#1") == ev.DELETED
    assert object_keys(client, prefix_of(base)) == []
    with weightd.weight_get(rid, client=client) as rev:
        assert rev.id.weight_generation == 2
        assert {p: rev.read(p) for p in rev.files()} == tree(new_dir)
    done = completed(client, rid)
    assert done.watermark == 2
    assert done.claim.mode == pb.DELETE_FIRST


def test_delete_first_while_a_lease_holds_the_base_is_busy_before_anything_happens(
        client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    with weightd.weight_get(rid + "#1", client=client) as reader:
        with pytest.raises(weightd.Busy):
            weightd.weight_upsert(model_dir, rid + "#1", mode="DELETE_FIRST", client=client)
        # Nothing happened: no claim, no target, the base READY and readable.
        assert lineage(client, rid).claim.request_id == ""
        assert lineage(client, rid).watermark == 1
        with pytest.raises(weightd.NotFound):
            weightd.weight_get_metadata(rid + "#2", include_hidden=True, client=client)
        assert reader.read("config.json") == tree(model_dir)["config.json"]
        view = client.get_revision(id=rid + "#1")
        assert (view.availability, view.retired_by) == (ev.READY, "")


# --------------------------------------------------------------- errors

def test_a_target_generation_not_above_the_base_s_is_invalid_argument(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    weightd.weight_put(model_dir, rid, client=client)  # #2
    for target in (1, 2):
        with pytest.raises(weightd.InvalidArgument) as e:
            weightd.weight_upsert(model_dir, rid + "#2", target_generation=target, client=client)
        assert "target_generation" in e.value.message
    assert lineage(client, rid).claim.request_id == ""
    assert client.get_revision(id=rid + "#2").availability == ev.READY


def test_a_target_generation_not_above_the_watermark_is_conflict(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    weightd.weight_put(model_dir, rid, client=client)  # #2: the watermark
    with pytest.raises(weightd.Conflict) as e:
        weightd.weight_upsert(model_dir, rid + "#1", target_generation=2, client=client)
    assert "watermark" in e.value.message
    assert lineage(client, rid).claim.request_id == ""


def test_a_target_that_exists_already_is_conflict_and_leaves_no_claim(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    files = transfer.model_files(model_dir)
    importing = client.id(rid + "#4")
    client.begin_import(transfer.begin_request(importing, files, None, weightd.new_request_id()))
    with pytest.raises(weightd.Conflict):
        weightd.weight_upsert(model_dir, rid + "#1", target_generation=4, client=client)
    assert lineage(client, rid).claim.request_id == ""
    assert client.get_revision(id=rid + "#1").retired_by == ""


def test_a_competing_claim_is_busy(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    base = client.id(rid + "#1")
    files = transfer.model_files(model_dir)
    other = "test-competing-claim"
    claim = client.begin_upsert(
        base=base, expected_metadata_generation=client.get_revision(id=base).metadata_generation,
        target_generation=5, request_id=other,
        **{"import": transfer.begin_request(client.id(rid + "#5"), files, None, other)})
    assert claim.phase == "IMPORTING_TARGET"
    try:
        with pytest.raises(weightd.Busy):
            weightd.weight_upsert(model_dir, rid + "#1", client=client)
        assert lineage(client, rid).claim.request_id == other
    finally:
        aborted = client.abort_upsert(base=base, request_id=other)
    assert aborted.phase == "ABORTED"
    # The lineage is free again.
    assert weightd.weight_upsert(model_dir, rid + "#1", client=client).availability == ev.READY


def test_get_lineage_of_a_lineage_without_revisions_is_not_found(client, rid):
    with pytest.raises(weightd.NotFound):
        lineage(client, rid)


def test_bad_arguments_are_refused_before_any_claim(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    with pytest.raises(weightd.InvalidArgument):
        weightd.weight_upsert(model_dir, rid + "#1", mode="SIDEWAYS", client=client)
    with pytest.raises(weightd.InvalidArgument):
        weightd.weight_upsert(model_dir, rid + "#1", jobs=0, client=client)
    with pytest.raises(weightd.NotFound):
        weightd.weight_upsert(model_dir, rid + "#9", client=client)
    with pytest.raises(TypeError):  # a source that cannot be a model
        weightd.weight_upsert({"weights.bin": 42}, rid + "#1", client=client)
    assert lineage(client, rid).claim.request_id == ""
    assert client.get_revision(id=rid + "#1").retired_by == ""


# ------------------------------------------------------ failures midway

def test_a_file_that_shrinks_during_the_upsert_aborts_the_claim_and_keeps_the_base(
        client, rid, model_dir, tmp_path, monkeypatch):
    base = weightd.weight_put(model_dir, rid, client=client)
    checkpoint = tmp_path / "checkpoint.bin"
    checkpoint.write_bytes(b"w" * 4096)
    source = {"a.json": b'{"step": 2}', "z.bin": checkpoint}  # a.json is uploaded first

    real_begin = client.begin_upsert

    def begin_then_truncate(*args, **kwargs):
        claim = real_begin(*args, **kwargs)
        checkpoint.write_bytes(b"w" * 10)  # the trainer rewrote it meanwhile
        return claim

    monkeypatch.setattr(client, "begin_upsert", begin_then_truncate)
    with pytest.raises(weightd.InvalidArgument) as e:
        weightd.weight_upsert(source, rid + "#1", jobs=1, client=client)
    assert "became shorter" in e.value.message
    monkeypatch.undo()

    after = lineage(client, rid)
    assert after.watermark == 1
    assert (after.claim.phase, after.claim.base_generation, after.claim.target_generation) == (
        "ABORTED", 1, 2)
    view = client.get_revision(id=rid + "#1")
    assert (view.availability, view.retired_by) == (ev.READY, "")
    assert availability(client, rid + "#2") != ev.READY
    target_prefix = prefix_of(base).replace("/1/", "/2/")
    assert object_keys(client, target_prefix) == []  # a.json's upload was removed
    with weightd.weight_get(rid, client=client) as rev:
        assert rev.id.weight_generation == 1
        assert {p: rev.read(p) for p in rev.files()} == tree(model_dir)
    # The lineage is not stuck: the next upsert goes through.
    assert weightd.weight_upsert(model_dir, rid + "#1", client=client).availability == ev.READY


def test_a_put_that_fails_after_the_claim_aborts_it(client, rid, model_dir, monkeypatch):
    weightd.weight_put(model_dir, rid, client=client)
    real_put = client.put_object
    puts = []

    def failing_put(*args, **kwargs):
        puts.append(kwargs.get("key"))
        if len(puts) == 2:
            raise weightd.Unavailable.local("the network went away")
        return real_put(*args, **kwargs)

    monkeypatch.setattr(client, "put_object", failing_put)
    with pytest.raises(weightd.Unavailable):
        weightd.weight_upsert(model_dir, rid + "#1", jobs=1, client=client)
    monkeypatch.undo()
    assert lineage(client, rid).claim.phase == "ABORTED"
    assert client.get_revision(id=rid + "#1").availability == ev.READY
    assert client.get_revision(id=rid + "#1").retired_by == ""


def test_a_commit_the_daemon_refuses_changes_nothing_and_the_right_one_succeeds(
        client, rid, model_dir):
    # Raw RPCs: a CommitUpsert refused with CONFLICT (the group is not what
    # the commit says) leaves the claim and its IMPORTING target as they were.
    weightd.weight_put(model_dir, rid, client=client)
    base, target = client.id(rid + "#1"), client.id(rid + "#2")
    files = transfer.model_files(model_dir)
    request_id = weightd.new_request_id()
    client.begin_upsert(
        base=base, expected_metadata_generation=client.get_revision(id=base).metadata_generation,
        target_generation=2, request_id=request_id,
        **{"import": transfer.begin_request(target, files, None, request_id)})
    begun = client.get_revision(id=target, include_hidden=True)
    commit = transfer.upload_revision(client, target, files, begun, 2, [], request_id)
    commit.manifest.payload_count += 1
    with pytest.raises(weightd.Conflict):
        client.commit_upsert(target=target, request_id=request_id, commit=commit)
    after = lineage(client, rid)
    assert (after.watermark, after.claim.request_id, after.claim.phase) == (
        1, request_id, "IMPORTING_TARGET")
    assert client.get_revision(id=target, include_hidden=True).availability == ev.IMPORTING
    view = client.get_revision(id=base)
    assert (view.availability, view.retired_by) == (ev.READY, "")
    with weightd.weight_get(rid, client=client) as rev:
        assert rev.id.weight_generation == 1
    commit.manifest.payload_count -= 1
    client.commit_upsert(target=target, request_id=request_id, commit=commit)
    assert lineage(client, rid).claim.phase in ("RETIRING_BASE", "DELETING_BASE", "COMPLETED")


def test_weight_upsert_waits_for_a_delete_first_base_still_being_deleted(
        client, rid, model_dir, monkeypatch):
    # A large base may still be DELETING_BASE when BeginUpsert returns (its
    # payloads go in batches); weight_upsert polls GetLineage until the claim
    # imports its target, as weightctl upsert does. The daemon deletes this
    # small base at once, so the wait is staged.
    weightd.weight_put(model_dir, rid, client=client)
    real_begin, real_lineage = client.begin_upsert, client.get_lineage
    polls = []

    def begin_still_deleting(*args, **kwargs):
        claim = real_begin(*args, **kwargs)
        staged = pb.UpsertClaim()
        staged.CopyFrom(claim)
        staged.phase = "DELETING_BASE"
        return staged

    def lineage_deleting_twice(*args, **kwargs):
        answer = real_lineage(*args, **kwargs)
        polls.append(answer.claim.phase)
        if len(polls) <= 2:
            answer.claim.phase = "DELETING_BASE"
        return answer

    monkeypatch.setattr(client, "begin_upsert", begin_still_deleting)
    monkeypatch.setattr(client, "get_lineage", lineage_deleting_twice)
    view = weightd.weight_upsert(model_dir, rid + "#1", mode="DELETE_FIRST", client=client)
    monkeypatch.undo()
    assert view.availability == ev.READY
    assert len(polls) == 3
    assert lineage(client, rid).watermark == 2


def test_a_failed_abort_is_noted_on_the_original_error(client, rid, model_dir, monkeypatch):
    if not hasattr(BaseException, "add_note"):
        pytest.skip("exception notes need Python 3.11")
    weightd.weight_put(model_dir, rid, client=client)

    def no_put(*args, **kwargs):
        raise weightd.Unavailable.local("the network went away")

    def no_abort(*args, **kwargs):
        raise weightd.Unavailable.local("still away")

    real_abort = client.abort_upsert
    monkeypatch.setattr(client, "put_object", no_put)
    monkeypatch.setattr(client, "abort_upsert", no_abort)
    with pytest.raises(weightd.Unavailable) as e:
        weightd.weight_upsert(model_dir, rid + "#1", client=client)
    monkeypatch.undo()
    claim = lineage(client, rid).claim
    assert claim.phase == "IMPORTING_TARGET"  # nobody aborted it
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert f"weightctl lineage {rid} --abort {claim.request_id}" in notes
    assert real_abort(base=rid + "#1", request_id=claim.request_id).phase == "ABORTED"
