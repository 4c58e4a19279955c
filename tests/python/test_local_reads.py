"""Local reads (SPEC §4): on the daemon's host, files are mapped, not streamed.

The fallback to streaming itself is covered by every other read test.
"""

import mmap
import os
import stat

import numpy as np

import weightd
from weightd import safetensors

from conftest import Daemon


def mapping_of(array):
    """The mmap an array's memory comes from, or None when it is a copy."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    obj = base.obj if isinstance(base, memoryview) else base
    return obj if isinstance(obj, mmap.mmap) else None


def test_open_safetensors_maps_the_replica_file_zero_copy(daemon, client, rid, tmp_path):
    original = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(4)}
    safetensors.save_file(original, tmp_path / "model.safetensors")
    weightd.weight_put(tmp_path, rid, client=client)
    with weightd.weight_get(rid, client=client) as rev:
        local = rev.local_files()
        assert rev.local_error is None, rev.local_error
        assert set(local) == set(rev.view.payload_keys)
        for f in local.values():
            assert os.path.isabs(f.path) and f.path.startswith(str(daemon.root))
            assert stat.S_IMODE(os.stat(f.path).st_mode) == 0o440  # read-only replicas
        tensors = rev.open_safetensors("model.safetensors")
        for name, array in original.items():
            np.testing.assert_array_equal(tensors[name], array)
            assert mapping_of(tensors[name]) is not None, f"{name} was copied"
            assert not tensors[name].flags.writeable


def test_local_reads_off_falls_back_to_streaming(tmp_path):
    d = Daemon(tmp_path / "weightd", flags=["--local-reads=false"])
    d.start()
    try:
        client = d.client()
        weightd.weight_put({"w": np.arange(3.0)}, "default/m@main", client=client)
        with weightd.weight_get("default/m@main", client=client) as rev:
            w = rev.open_safetensors("w.safetensors")["w"]
            np.testing.assert_array_equal(w, np.arange(3.0))
            assert isinstance(rev.local_error, weightd.PermissionDenied)
            assert mapping_of(w) is None
    finally:
        d.stop()
