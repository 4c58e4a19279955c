"""Client: one method per RPC, requests from keywords, typed errors (SPEC §5)."""

import re

import grpc
import pytest

import weightd
from weightd import weightd_pb2 as pb


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# ObjectService's names are prefixed so they read apart from the revision calls.
OBJECT_METHODS = {"Put": "put_object", "Get": "get_object", "Stat": "stat_object",
                  "Remove": "remove_object", "BatchRemove": "batch_remove_objects",
                  "RemoveAll": "remove_all_objects", "Evict": "evict", "List": "list_objects"}


def test_every_rpc_has_a_method():
    services = pb.DESCRIPTOR.services_by_name
    for method in services["WeightService"].methods:
        assert callable(getattr(weightd.Client, snake(method.name))), method.name
    for method in services["ObjectService"].methods:
        assert callable(getattr(weightd.Client, OBJECT_METHODS[method.name])), method.name
    for method in services["AdminService"].methods:
        assert callable(getattr(weightd.Client, snake(method.name))), method.name


def test_status_and_objects_from_keywords(client, rid):
    status = client.status()
    assert status.version and status.journal_seq >= 1
    key = "python-test/" + rid
    info = client.put_object(b"hello", key=key)
    assert (info.key, info.size, info.tenant) == (key, 5, "default")
    got, data = client.get_object(key=key)
    assert (got.key, data) == (key, b"hello")
    listed = client.list_objects(prefix="python-test/")
    assert key in [o.key for o in listed.objects]
    with pytest.raises(weightd.ObjectAlreadyExists):
        client.put_object(b"again", key=key)
    client.remove_object(key=key, force=True)
    with pytest.raises(weightd.NotFound):
        client.stat_object(key=key)


def test_a_chunked_put_streams_in_pieces(client, rid):
    key = "python-test/chunked/" + rid
    pieces = [b"a" * (5 << 20), b"b" * 100]  # more than one 4 MiB chunk
    client.put_object(iter(pieces), key=key, size=sum(map(len, pieces)))
    _, data = client.get_object(key=key)
    assert data == b"".join(pieces)
    client.remove_object(key=key, force=True)


def test_an_exception_in_the_put_data_is_the_one_raised(client, rid):
    def broken():
        yield b"x" * 10
        raise OSError("disk went away")
    with pytest.raises(OSError, match="disk went away"):
        client.put_object(broken(), key="python-test/broken/" + rid, size=100)


def test_missing_revision_is_not_found(client):
    with pytest.raises(weightd.NotFound) as e:
        client.get_revision(id="default/no-such-model@main#1")
    assert e.value.code == "NOT_FOUND"
    assert e.value.grpc_status == grpc.StatusCode.NOT_FOUND
    assert "no-such-model" in e.value.message
    assert isinstance(e.value, weightd.WeightdError)


def test_missing_revision_in_the_surface_is_not_found(client):
    with pytest.raises(weightd.NotFound):
        weightd.weight_get_metadata("default/no-such-model@main", client=client)
    assert weightd.weight_is_exist("default/no-such-model@main#3", client=client) is False


@pytest.mark.parametrize("call, field", [
    (lambda c: c.list_revisions(limit=5000), "limit"),
    (lambda c: c.acquire_lease(id="default/m@main#1", holder="h", ttl_ms=0), "ttl_ms"),
    (lambda c: c.get_revision(id=weightd.events_pb2.RevisionId(
        resource="bad\x01name", revision="main", weight_generation=1)), "id.resource"),
    (lambda c: c.get_revision(id="default/m@main"), "weight_generation"),
])
def test_invalid_argument_names_the_field(client, call, field):
    with pytest.raises(weightd.InvalidArgument) as e:
        call(client)
    assert field in e.value.message
    assert e.value.grpc_status == grpc.StatusCode.INVALID_ARGUMENT


def test_stale_generation_is_typed(client, rid, model_dir):
    view = weightd.weight_put(model_dir, rid, client=client)
    with pytest.raises(weightd.StaleGeneration):
        client.update_policy(id=view.id, expected_metadata_generation=99,
                             policy=weightd.make_policy("COLD"))


def test_conflict_is_typed(client, rid, model_dir):
    view = weightd.weight_put(model_dir, rid, client=client)
    with pytest.raises(weightd.Conflict):  # a BeginImport of a READY id with other parameters
        client.begin_import(id=view.id, expected_payload_count=1, expected_logical_bytes=1)


def test_busy_when_removing_a_leased_revision_without_drain(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    with weightd.weight_get(rid, client=client) as rev:
        with pytest.raises(weightd.Busy) as e:
            weightd.weight_remove(rid, client=client)
        assert e.value.grpc_status == grpc.StatusCode.UNAVAILABLE
        assert rev.lease.holder in e.value.message  # it names the blocker
    weightd.weight_remove(rid, client=client)  # released: now it goes


def test_unreachable_daemon_is_unavailable():
    from conftest import free_port
    dead = weightd.Client(f"127.0.0.1:{free_port()}", timeout=2.0)
    with pytest.raises(weightd.Unavailable) as e:
        dead.status()
    assert "unreachable" in e.value.message
    with pytest.raises(weightd.Unavailable):
        weightd.weight_list(client=dead)


def test_get_lineage_of_an_unknown_lineage_is_not_found(client):
    with pytest.raises(weightd.NotFound) as e:
        client.get_lineage(ns="default", resource="no-such-lineage", revision="main")
    assert e.value.code == "NOT_FOUND"
    assert "no-such-lineage" in e.value.message


def test_request_fields_convert_enum_names_and_ids(client):
    req = client._request(pb.MigrateRequest, None, {"id": "acme:prod/m@r#2", "target": "cold"})
    assert req.target == weightd.events_pb2.RESIDENCY_COLD
    assert (req.id.tenant, req.id.ns, req.id.weight_generation) == ("acme", "prod", 2)
    assert req.request_id.startswith("python-")
    with pytest.raises(TypeError):
        client._request(pb.MigrateRequest, None, {"no_such_field": 1})


def test_promote_on_a_leader_is_not_ready(client):
    # SPEC §11: only a standby is promoted; the leader says so.
    with pytest.raises(weightd.NotReady, match="leader already"):
        client.promote()
