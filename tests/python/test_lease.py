"""weight_get's lease: renewed past its TTL, released on exit and on exceptions."""

import time

import pytest

import weightd


def leases(client, rid):
    return list(client.list_leases(id=weightd.weight_get_metadata(rid, client=client).id).leases)


def test_the_lease_is_renewed_past_its_ttl(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    with weightd.weight_get(rid, ttl=1.0, client=client) as rev:
        first_expiry = rev.lease.expiry_ms
        time.sleep(3.0)  # three TTLs: only renewals keep it (the reconciler expires leases)
        assert rev.renewal_error is None
        assert rev.read("config.json") == (model_dir / "config.json").read_bytes()
        live = leases(client, rid)
        assert [lease.lease_id for lease in live] == [rev.lease.lease_id]
        assert live[0].holder == rev.lease.holder and live[0].expiry_ms > first_expiry
    assert leases(client, rid) == []


def test_the_lease_is_released_when_the_block_raises(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    with pytest.raises(RuntimeError, match="reader crashed"):
        with weightd.weight_get(rid, client=client) as rev:
            assert len(leases(client, rid)) == 1
            raise RuntimeError("reader crashed")
    assert leases(client, rid) == []
    with pytest.raises(weightd.LeaseExpired):  # reading after the block is refused
        rev.read("config.json")
    weightd.weight_remove(rid, client=client)  # nothing blocks it any more


def test_two_readers_in_one_process_hold_two_leases(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    with weightd.weight_get(rid, client=client) as a, weightd.weight_get(rid, client=client) as b:
        assert a.lease.lease_id != b.lease.lease_id
        assert len(leases(client, rid)) == 2
    assert leases(client, rid) == []


def test_no_lease_on_a_missing_or_hidden_revision(client, rid):
    with pytest.raises(weightd.NotFound):
        with weightd.weight_get(rid, client=client):
            pass


def test_a_revoked_lease_stops_the_reads(client, rid, model_dir):
    weightd.weight_put(model_dir, rid, client=client)
    with weightd.weight_get(rid, ttl=0.6, client=client) as rev:
        client.revoke_lease(lease_id=rev.lease.lease_id, reason="test")
        time.sleep(0.6)  # a renewal or two meets the revoked lease
        with pytest.raises(weightd.LeaseExpired):
            rev.read("config.json")
