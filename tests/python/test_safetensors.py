"""The package's own safetensors reader/writer, and tensors read back from a revision."""

import json
import struct

import numpy as np
import pytest

import weightd
from weightd import safetensors


def tensors():
    rng = np.random.default_rng(7)
    return {
        "embed.weight": rng.standard_normal((16, 8)).astype(np.float32),
        "lm_head.bias": rng.standard_normal(8).astype(np.float16),
        "layers.0.ids": np.arange(-5, 5, dtype=np.int64),
        "mask": np.array([True, False, True]),
        "scalar": np.array(3.5, dtype=np.float64),
        "empty": np.zeros((0, 4), dtype=np.int32),
        "bytes": np.frombuffer(b"\x01\x02\xff", dtype=np.uint8),
    }


def test_round_trip_keeps_dtype_shape_and_values():
    original = tensors()
    data = safetensors.dumps(original, metadata={"format": "pt"})
    loaded = safetensors.load(data)
    assert set(loaded) == set(original)
    for name, array in original.items():
        assert loaded[name].dtype == array.dtype.newbyteorder("<") or \
            loaded[name].dtype == array.dtype
        assert loaded[name].shape == array.shape
        np.testing.assert_array_equal(loaded[name], array)
    assert safetensors.metadata(data) == {"format": "pt"}


def test_the_layout_is_the_format_s():
    data = safetensors.dumps({"x": np.array([1.0, 2.0], dtype=np.float32)})
    (length,) = struct.unpack("<Q", data[:8])
    assert length % 8 == 0  # padded, so every tensor is aligned
    header = json.loads(data[8:8 + length])
    assert header == {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    assert data[8 + length:] == np.array([1.0, 2.0], dtype="<f4").tobytes()


def test_reading_is_zero_copy_and_read_only(tmp_path):
    path = tmp_path / "m.safetensors"
    safetensors.save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, path)
    w = safetensors.load_file(path)["w"]
    assert not w.flags.writeable and not w.flags.owndata  # a view of the mmap
    np.testing.assert_array_equal(w, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_big_endian_and_strided_arrays_are_stored_little_endian_row_major():
    big = np.arange(6, dtype=">i4").reshape(2, 3).T  # big-endian and not contiguous
    loaded = safetensors.load(safetensors.dumps({"t": big}))["t"]
    np.testing.assert_array_equal(loaded, big)
    assert loaded.dtype.byteorder in ("<", "=")


@pytest.mark.parametrize("mangle, why", [
    (lambda d: d[:4], "too few"),
    (lambda d: struct.pack("<Q", 10 ** 9) + d[8:], "does not fit"),
    (lambda d: d[:8] + b"[" + d[9:], "not JSON"),
    (lambda d: d[:-4], "outside"),
])
def test_malformed_files_are_refused_saying_why(mangle, why):
    data = safetensors.dumps({"x": np.zeros(4, dtype=np.float32)})
    with pytest.raises(safetensors.SafetensorsError, match=why):
        safetensors.load(mangle(data))


def test_bfloat16_comes_back_as_raw_bits():
    bits = np.array([0x3F80, 0x4000], dtype="<u2")  # 1.0, 2.0 in bfloat16
    header = json.dumps({"b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    data = struct.pack("<Q", len(header)) + header + bits.tobytes()
    np.testing.assert_array_equal(safetensors.load(data)["b"], bits)


def test_a_stored_safetensors_file_reads_back_as_equal_arrays(client, rid, tmp_path):
    original = tensors()
    safetensors.save_file(original, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text("{}")
    weightd.weight_put(tmp_path, rid, client=client)
    with weightd.weight_get(rid, client=client) as rev:
        loaded = rev.open_safetensors("model.safetensors")
        assert set(loaded) == set(original)
        for name, array in original.items():
            np.testing.assert_array_equal(loaded[name], array)
            assert loaded[name].dtype == array.dtype and loaded[name].shape == array.shape


def test_a_dict_of_arrays_is_stored_as_safetensors_files(client, rid):
    embed = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    head = {"w": np.ones((2, 2), dtype=np.float16), "b": np.zeros(2, dtype=np.float16)}
    weightd.weight_put({"embed": embed, "head.safetensors": head, "config.json": b"{}"}, rid,
                       client=client)
    with weightd.weight_get(rid, client=client) as rev:
        assert rev.files() == ["config.json", "embed.safetensors", "head.safetensors"]
        np.testing.assert_array_equal(rev.open_safetensors("embed.safetensors")["embed"], embed)
        loaded = rev.open_safetensors("head.safetensors")
        np.testing.assert_array_equal(loaded["w"], head["w"])
        assert rev.read("config.json") == b"{}"


def test_torch_tensors_when_torch_is_installed(client, rid):
    torch = pytest.importorskip("torch")
    weightd.weight_put({"t": np.arange(4, dtype=np.float32)}, rid, client=client)
    with weightd.weight_get(rid, client=client) as rev:
        t = rev.open_safetensors("t.safetensors", torch=True)["t"]
        assert t.dtype == torch.float32 and t.tolist() == [0.0, 1.0, 2.0, 3.0]
