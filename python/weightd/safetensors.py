"""A minimal safetensors reader and writer (no third-party package).

The format: an 8-byte little-endian header length N, N bytes of JSON
``{name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
"__metadata__": {str: str}}`` (offsets relative to the end of the header),
then the tensors' bytes, little-endian, row-major.

Reading is zero-copy: every array is `numpy.frombuffer` over the buffer it
came from (an mmap of a replica file, usually), so it is read-only and keeps
that buffer alive. numpy has no bfloat16 or float8: BF16 tensors come back as
uint16 arrays of the raw bits and F8_* as uint8 (``torch=True`` gives the real
dtypes).
"""

from __future__ import annotations

import json
import math
import os
import struct
import warnings
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

import numpy as np

Buffer = Union[bytes, bytearray, memoryview, Any]  # anything memoryview() takes (mmap too)
#: read(start, end) -> the bytes [start, end) of a file, as a buffer.
Reader = Callable[[int, int], Buffer]

# safetensors dtype -> numpy dtype (little-endian); BF16/F8 as raw bits.
_NUMPY: Dict[str, str] = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1",
    "BOOL": "?", "F8_E4M3": "u1", "F8_E5M2": "u1",
}
_ITEMSIZE = {name: np.dtype(dt).itemsize for name, dt in _NUMPY.items()}
# numpy dtype -> safetensors dtype, for writing (never BF16/F8: numpy has none).
_FROM_NUMPY: Dict[str, str] = {
    "f8": "F64", "f4": "F32", "f2": "F16", "i8": "I64", "i4": "I32", "i2": "I16", "i1": "I8",
    "u8": "U64", "u4": "U32", "u2": "U16", "u1": "U8", "b1": "BOOL",
}
# The reference implementation refuses headers above 100 MB; so does this one.
MAX_HEADER_BYTES = 100_000_000


class SafetensorsError(ValueError):
    """The bytes are not a valid safetensors file (the message says where)."""


def _check_entry(name: str, entry: Any, data_size: int) -> Tuple[str, Tuple[int, ...], int, int]:
    if not isinstance(entry, dict):
        raise SafetensorsError(f"tensor {name!r}: the header entry is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in _NUMPY:
        raise SafetensorsError(f"tensor {name!r}: unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise SafetensorsError(f"tensor {name!r}: shape {shape!r} is not a list of sizes")
    if (not isinstance(offsets, list) or len(offsets) != 2 or
            not all(isinstance(o, int) for o in offsets)):
        raise SafetensorsError(f"tensor {name!r}: data_offsets {offsets!r} is not [begin, end]")
    begin, end = offsets
    if not 0 <= begin <= end <= data_size:
        raise SafetensorsError(f"tensor {name!r}: data_offsets {offsets} outside the "
                               f"{data_size} data bytes")
    if end - begin != math.prod(shape) * _ITEMSIZE[dtype]:
        raise SafetensorsError(f"tensor {name!r}: {end - begin} bytes do not hold a {dtype} "
                               f"tensor of shape {shape}")
    return dtype, tuple(shape), begin, end


def read_header(read: Reader, size: int) -> Tuple[Dict[str, Any], int]:
    """The parsed JSON header and where the data starts, from a file of `size` bytes."""
    if size < 8:
        raise SafetensorsError(f"{size} bytes are too few for a safetensors header length")
    (length,) = struct.unpack("<Q", bytes(read(0, 8)))
    if length > MAX_HEADER_BYTES or 8 + length > size:
        raise SafetensorsError(f"the header length {length} does not fit the {size}-byte file")
    try:
        header = json.loads(bytes(read(8, 8 + length)).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise SafetensorsError(f"the header is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise SafetensorsError("the header is not a JSON object")
    return header, 8 + length


def load_from(read: Reader, size: int, *, torch: bool = False) -> Dict[str, Any]:
    """Every tensor of a safetensors file read through `read(start, end)`.

    Each array is a view of the buffer `read` returned for its bytes (no copy
    unless `read` made one). With ``torch=True``, torch tensors over the same
    buffers (torch.frombuffer); ImportError when torch is not installed.
    """
    header, data_start = read_header(read, size)
    make = _torch_tensor if torch else _numpy_array
    out: Dict[str, Any] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, begin, end = _check_entry(name, entry, size - data_start)
        out[name] = make(read(data_start + begin, data_start + end), dtype, shape)
    return out


def load(buffer: Buffer, *, torch: bool = False) -> Dict[str, Any]:
    """Every tensor of the safetensors bytes in `buffer` (zero-copy views of it)."""
    view = memoryview(buffer).cast("B")
    return load_from(lambda start, end: view[start:end], len(view), torch=torch)


def load_file(path: Union[str, os.PathLike], *, torch: bool = False) -> Dict[str, Any]:
    """Every tensor of a safetensors file, memory-mapped read-only (zero-copy)."""
    import mmap
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise SafetensorsError(f"{os.fspath(path)} is empty")
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # outlives the fd
    return load(mapped, torch=torch)


def metadata(buffer: Buffer) -> Dict[str, str]:
    """The ``__metadata__`` of safetensors bytes ({} when there is none)."""
    view = memoryview(buffer).cast("B")
    header, _ = read_header(lambda s, e: view[s:e], len(view))
    return dict(header.get("__metadata__") or {})


def _numpy_array(buf: Buffer, dtype: str, shape: Tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(buf, dtype=np.dtype(_NUMPY[dtype])).reshape(shape)


def _torch_tensor(buf: Buffer, dtype: str, shape: Tuple[int, ...]) -> Any:
    import torch  # optional: only this path needs it
    names = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
             "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
             "U16": "uint16", "U32": "uint32", "U64": "uint64", "BOOL": "bool",
             "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
    torch_dtype = getattr(torch, names[dtype], None)
    if torch_dtype is None:
        raise SafetensorsError(f"this torch has no dtype for {dtype}")
    if len(memoryview(buf)) == 0:  # torch.frombuffer refuses an empty buffer
        return torch.empty(shape, dtype=torch_dtype)
    with warnings.catch_warnings():
        # The buffer is a read-only mapping on purpose; torch warns about it.
        warnings.simplefilter("ignore", UserWarning)
        return torch.frombuffer(buf, dtype=torch_dtype).reshape(shape)


def dumps(tensors: Mapping[str, Any], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The safetensors bytes of `tensors` (numpy arrays, or anything np.asarray takes)."""
    arrays: Dict[str, Tuple[str, np.ndarray]] = {}
    for name, value in tensors.items():
        if name == "__metadata__":
            raise SafetensorsError("'__metadata__' is reserved; pass metadata= instead")
        array = np.asarray(value)
        key = array.dtype.kind + str(array.dtype.itemsize)
        if key not in _FROM_NUMPY:
            raise SafetensorsError(f"tensor {name!r}: dtype {array.dtype} has no safetensors "
                                   "equivalent")
        # Stored little-endian and row-major whatever the array's layout.
        # (astype, not ascontiguousarray: that one makes a 0-d array 1-d.)
        little = array.astype(array.dtype.newbyteorder("<"), order="C", copy=False)
        arrays[name] = (_FROM_NUMPY[key], little)
    header: Dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    # Widest dtypes first, so that with an 8-aligned header every tensor is aligned.
    order = sorted(arrays, key=lambda n: (-arrays[n][1].dtype.itemsize, n))
    offset = 0
    for name in order:
        dtype, array = arrays[name]
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # pad with spaces, as the reference writer does
    parts = [struct.pack("<Q", len(text)), text] + [arrays[n][1].tobytes() for n in order]
    return b"".join(parts)


def save_file(tensors: Mapping[str, Any], path: Union[str, os.PathLike],
              metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes `tensors` as a safetensors file at `path`."""
    with open(path, "wb") as f:
        f.write(dumps(tensors, metadata))


__all__ = ["SafetensorsError", "dumps", "load", "load_file", "load_from", "metadata",
           "read_header", "save_file"]
