"""Cross-client compatibility: Python and weightctl read each other's revisions.

Both write the same payload keys and the same manifest bytes, so either
client exports what the other imported, byte for byte.
"""

import hashlib
import json

import pytest

import weightd
from weightd import events_pb2 as ev
from weightd import ids

from conftest import tree


def manifest_of(client, view):
    _, text = client.get_object(key=view.manifest.manifest_key)
    return text


def test_python_import_exports_identically_with_weightctl(daemon, client, rid, model_dir,
                                                          tmp_path):
    view = weightd.weight_put(model_dir, rid, client=client)
    out = tmp_path / "out"
    daemon.ctl("export", weightd.format_id(view.id), str(out), "--quiet")
    assert tree(out) == tree(model_dir)


def test_weightctl_import_exports_identically_with_python(daemon, client, rid, model_dir,
                                                          tmp_path):
    daemon.ctl("import", str(model_dir), "--as", rid, "--quiet")
    out = tmp_path / "out"
    with weightd.weight_get(rid, client=client) as rev:
        assert rev.export(out) == (len(tree(model_dir)),
                                   sum(map(len, tree(model_dir).values())))
        assert rev.read("tokenizer/vocab.txt") == (model_dir / "tokenizer/vocab.txt").read_bytes()
    assert tree(out) == tree(model_dir)


def test_both_clients_write_the_same_manifest_bytes(daemon, client, rid, model_dir):
    ours = weightd.weight_put(model_dir, rid, client=client)  # generation 1
    daemon.ctl("import", str(model_dir), "--as", rid, "--quiet")  # generation 2
    theirs = weightd.weight_get_metadata(rid + "#2", client=client)
    ours_text = manifest_of(client, ours)
    theirs_text = manifest_of(client, theirs)
    # The manifests differ only in the generation inside each chunk's key.
    assert ours_text.replace(b"/main/1/files/", b"/main/N/files/") == \
        theirs_text.replace(b"/main/2/files/", b"/main/N/files/")
    assert json.loads(ours_text)["format"] == "weightd.model/1"
    assert ours.manifest.payload_count == theirs.manifest.payload_count
    assert sorted(k.replace("/main/1/", "/") for k in ours.payload_keys) == \
        sorted(k.replace("/main/2/", "/") for k in theirs.payload_keys)


def test_a_file_over_64_mib_is_cut_into_parts_like_weightctl_cuts_it(daemon, client, rid,
                                                                       tmp_path):
    model = tmp_path / "big"
    model.mkdir()
    block = hashlib.sha256(b"seed").digest() * 2048  # 64 KiB, repeated: cheap to make
    with open(model / "weights.bin", "wb") as f:
        for _ in range(1025):  # 64 MiB + 64 KiB
            f.write(block)
    view = weightd.weight_put(model, rid, client=client)
    prefix = ids.files_prefix(view.id)
    assert sorted(view.payload_keys) == [prefix + "weights.bin.part0000",
                                         prefix + "weights.bin.part0001"]
    out = tmp_path / "out"
    daemon.ctl("export", weightd.format_id(view.id), str(out), "--quiet")
    assert (out / "weights.bin").read_bytes() == (model / "weights.bin").read_bytes()
    with weightd.weight_get(rid, client=client) as rev:
        # A read that crosses the two payloads.
        assert rev.read("weights.bin") == (model / "weights.bin").read_bytes()


def test_export_refuses_a_manifest_with_an_unsafe_path(client, rid, tmp_path):
    """A manifest naming ../ is refused whole, before anything is written."""
    rid_ = client.id(rid + "#1")
    group = ids.payload_group_id(rid_)
    key = ids.files_prefix(rid_) + "evil"
    client.begin_import(id=rid_, expected_payload_count=1, expected_logical_bytes=4,
                        affinity_count=1)
    client.put_object(b"evil", tenant=rid_.tenant, key=key, data_type=ev.DATA_TYPE_WEIGHT,
                      group_id=group, affinity_id="evil")
    manifest = json.dumps({"format": "weightd.model/1", "files": [
        {"path": "../evil", "size": 4, "sha256": hashlib.sha256(b"evil").hexdigest(),
         "chunks": [{"key": key, "offset": 0, "size": 4}]}]}).encode()
    info = client.put_object(manifest, tenant=rid_.tenant, key=ids.manifest_key(rid_),
                             data_type=ev.DATA_TYPE_METADATA, group_id=group)
    client.commit_import(id=rid_, expected_metadata_generation=1, payload_keys=[key], manifest={
        "manifest_key": ids.manifest_key(rid_), "manifest_sha256": info.sha256,
        "payload_keys_sha256": ids.payload_keys_sha256([key]), "payload_count": 1,
        "logical_bytes": 4})
    out = tmp_path / "out"
    with pytest.raises(weightd.DataLoss, match=r"unsafe path '\.\./evil'"):
        with weightd.weight_get(rid, client=client) as rev:
            rev.export(out)
    assert not out.exists() and not (tmp_path / "evil").exists()


def test_export_verifies_every_sha256(client, rid, model_dir, tmp_path, monkeypatch):
    weightd.weight_put(model_dir, rid, client=client)
    with weightd.weight_get(rid, client=client) as rev:
        # The manifest as if the stored bytes were not the ones it describes.
        rev.manifest.files[0].sha256 = "0" * 64
        with pytest.raises(weightd.DataLoss, match="sha256"):
            rev.export(tmp_path / "out")
        with pytest.raises(weightd.DataLoss, match="sha256"):
            rev.read(rev.manifest.files[0].path)
    left = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert left == []  # nothing half-exported stays behind
