"""The weight_* surface against a real daemon (weight_upsert: test_upsert.py)."""

import os
import time

import numpy as np
import pytest

import weightd
from weightd import events_pb2 as ev
from weightd import weightd_pb2 as pb

from conftest import tree


def test_weight_put_imports_a_directory_as_a_ready_revision(client, rid, model_dir):
    view = weightd.weight_put(model_dir, rid, client=client)
    assert view.availability == ev.READY
    assert weightd.format_id(view.id) == rid + "#1"
    files = tree(model_dir)
    assert view.manifest.logical_bytes == sum(len(b) for b in files.values())
    assert view.manifest.payload_count == len(files)
    # Without #generation the next import is the next generation.
    again = weightd.weight_put(model_dir, rid, client=client)
    assert again.id.weight_generation == 2


def test_weight_put_stores_weightctl_s_keys_and_types(client, rid, model_dir):
    view = weightd.weight_put(model_dir, rid, client=client)
    prefix = f"weights/default/{view.id.resource}/main/1/files/"
    assert sorted(view.payload_keys) == sorted(prefix + p for p in tree(model_dir))
    info = client.stat_object(key=prefix + "alias.json")  # a symlink: under its own path
    assert (info.data_type, info.affinity_id, info.group_id) == (
        ev.DATA_TYPE_WEIGHT, "alias.json", weightd.ids.payload_group_id(view.id))
    manifest = client.stat_object(key=view.manifest.manifest_key)
    assert manifest.data_type == ev.DATA_TYPE_METADATA


def test_weight_put_with_a_cold_policy_writes_straight_to_cold(client, rid, model_dir):
    view = weightd.weight_put(model_dir, rid, policy="COLD", client=client)
    assert view.policy.preferred_residency == ev.RESIDENCY_COLD
    for key in view.payload_keys:
        assert list(client.stat_object(key=key).replicas) == [ev.TIER_COLD]


def test_weight_put_with_a_mixed_policy_follows_the_planner(client, rid, tmp_path):
    sizes = {"a.bin": 6000, "b.bin": 5000, "c.bin": 4000, "d.bin": 3000}
    view = weightd.weight_put({n: b"x" * s for n, s in sizes.items()}, rid,
                              policy={"preferred": "MIXED", "ratio": 0.5}, client=client)
    hot = {k.rsplit("/", 1)[1] for k in view.payload_keys
           if ev.TIER_HOT in client.stat_object(key=k).replicas}
    assert hot == {"b.bin", "c.bin"}  # tests/mixed_planner_test.cpp's case


def test_an_unreadable_entry_stops_the_import_naming_it(client, rid, model_dir):
    os.symlink("missing.bin", model_dir / "dangling.bin")
    with pytest.raises(weightd.InvalidArgument) as e:
        weightd.weight_put(model_dir, rid, client=client)
    assert "dangling symlink" in e.value.message and "dangling.bin" in e.value.message
    assert weightd.weight_list(resource=weightd.parse_id(rid).resource,
                               states=["IMPORTING", "READY", "DELETED"], client=client) == []


def test_a_fifo_or_a_directory_link_stops_the_import(client, rid, model_dir, tmp_path):
    os.mkfifo(model_dir / "pipe")
    with pytest.raises(weightd.InvalidArgument, match="not a regular file.*pipe|pipe.*not a regular"):
        weightd.weight_put(model_dir, rid, client=client)
    os.remove(model_dir / "pipe")
    os.symlink(tmp_path, model_dir / "linked-dir")
    with pytest.raises(weightd.InvalidArgument, match="symlink to a directory"):
        weightd.weight_put(model_dir, rid, client=client)


def test_a_failed_import_is_aborted_and_its_objects_removed(client, rid, model_dir,
                                                           monkeypatch):
    # A policy the daemon refuses at BeginImport changes nothing.
    with pytest.raises(weightd.InvalidArgument):
        weightd.weight_put(model_dir, rid, policy={"preferred": "MIXED", "ratio": 2.0},
                           client=client)
    # A failure after uploads began: the last file cannot be read any more.
    real_read = weightd.transfer.ModelFile.read

    def read(self, offset, size):
        if self.path == "tokenizer/vocab.txt":
            raise OSError("the disk went away")
        return real_read(self, offset, size)

    monkeypatch.setattr(weightd.transfer.ModelFile, "read", read)
    with pytest.raises(OSError, match="the disk went away"):
        weightd.weight_put(model_dir, rid, jobs=1, client=client)
    for _ in range(100):  # a large group may finish deleting in the background
        views = weightd.weight_list(resource=weightd.parse_id(rid).resource,
                                    states=["IMPORTING", "READY", "DELETING", "DELETED"],
                                    client=client)
        if [v.availability for v in views] == [ev.DELETED]:
            break
        time.sleep(0.05)
    assert [v.availability for v in views] == [ev.DELETED]
    prefix = f"weights/default/{weightd.parse_id(rid).resource}/"
    assert list(client.list_objects(prefix=prefix).objects) == []


def test_weight_is_exist(client, rid, model_dir):
    assert not weightd.weight_is_exist(rid, client=client)
    weightd.weight_put(model_dir, rid, client=client)
    assert weightd.weight_is_exist(rid, client=client)
    assert weightd.weight_is_exist(rid + "#1", client=client)
    assert not weightd.weight_is_exist(rid + "#2", client=client)


def test_weight_get_metadata_and_size(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    view = weightd.weight_get_metadata(rid, client=client)
    assert isinstance(view, pb.RevisionView)
    assert view.availability == ev.READY and view.residency == ev.RESIDENCY_HOT
    assert view.metadata_generation == 2  # begun, committed
    assert weightd.weight_get_size(rid, client=client) == sum(map(len, tree(model_dir).values()))


def test_weight_list_pages_through_a_namespace(client, model_dir):
    ns = "list-ns"
    for name in ("b", "a", "c"):
        weightd.weight_put(model_dir, f"{ns}/{name}@main", client=client)
    weightd.weight_put(model_dir, f"{ns}/a@main", client=client)
    listed = weightd.weight_list(ns, client=client)
    assert [weightd.format_id(v.id) for v in listed] == [
        f"{ns}/a@main#1", f"{ns}/a@main#2", f"{ns}/b@main#1", f"{ns}/c@main#1"]
    assert len(weightd.weight_list(ns, "a", client=client)) == 2


def test_weight_update_policy_changes_only_the_parts_given(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    view = weightd.weight_update_policy(rid, mode="MANUAL", client=client)
    assert view.policy.migration_mode == ev.MIGRATION_MANUAL
    assert view.policy.preferred_residency == ev.RESIDENCY_HOT
    assert view.metadata_generation == 3
    view = weightd.weight_update_policy(rid, weightd.make_policy("HOT", 0.25, "PINNED"),
                                        client=client)
    assert (view.policy.mixed_hot_ratio, view.policy.migration_mode) == (0.25,
                                                                          ev.MIGRATION_PINNED)


def test_weight_migrate_and_weight_get_operation(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, policy={"preferred": "HOT", "mode": "MANUAL"},
                       client=client)
    op = weightd.weight_migrate(rid, "COLD", wait=True, timeout=20, client=client)
    assert op.state == pb.COMPLETED and op.target == ev.RESIDENCY_COLD
    again = weightd.weight_get_operation(op.operation_id, client=client)
    assert again.operation_id == op.operation_id and again.state == pb.COMPLETED
    assert weightd.weight_get_metadata(rid, client=client).residency == ev.RESIDENCY_COLD
    with pytest.raises(weightd.NotFound):
        weightd.weight_get_operation(10 ** 9, client=client)


def test_weight_remove(client, rid, model_dir):
    view = weightd.weight_put(model_dir, rid, client=client)
    removed = weightd.weight_remove(rid, client=client)
    assert removed.revision.availability in (ev.DELETING, ev.DELETED)
    assert not weightd.weight_is_exist(rid, client=client)
    hidden = weightd.weight_get_metadata(view.id, include_hidden=True, client=client)
    assert hidden.availability in (ev.DELETING, ev.DELETED)


def test_weight_remove_with_drain_waits_for_the_lease(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    with weightd.weight_get(rid, client=client) as rev:
        removed = weightd.weight_remove(rid, drain_timeout=30, client=client)
        assert removed.revision.drain_deadline_ms > 0
        assert rev.read("config.json")  # still readable while it drains
    # Released: the drain ends and the revision goes.
    for _ in range(200):
        if not weightd.weight_is_exist(rid, client=client):
            break
        time.sleep(0.05)
    assert not weightd.weight_is_exist(rid, client=client)


def test_the_default_client_comes_from_weightd_address(daemon, rid, model_dir, monkeypatch):
    monkeypatch.setenv("WEIGHTD_ADDRESS", daemon.address)
    weightd.set_default_client(None)
    try:
        weightd.weight_put(model_dir, rid)
        assert weightd.weight_is_exist(rid)
        assert weightd.default_client().address == daemon.address
    finally:
        weightd.set_default_client(None)


def test_numpy_arrays_and_bytes_in_one_model(client, rid):
    model = {"config.json": b'{"a": 1}', "w": np.eye(3, dtype=np.float32)}
    weightd.weight_put(model, rid, client=client)
    with weightd.weight_get(rid, client=client) as rev:
        assert rev.files() == ["config.json", "w.safetensors"]
        np.testing.assert_array_equal(rev.open_safetensors("w.safetensors")["w"], np.eye(3))
