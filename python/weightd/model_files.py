"""The files of a model, as an import sends them: `ModelFile` (its bytes from a
file on disk or from memory), a directory walked and checked, or an
in-memory model {path: bytes, numpy array, dict of arrays, pathlib.Path}.

A directory is walked and checked completely before anything is sent
(SPEC §7): a symlink is stored under its own path with its target's bytes;
a dangling link, a link to a directory, a FIFO or device, a file that cannot
be opened or a name that is not UTF-8 stops the import naming the path.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

import numpy as np

from . import safetensors
from .client import MAX_CHUNK_BYTES
from .errors import InvalidArgument

#: What weight_put accepts: a directory, or {path in the model: content}.
Source = Union[str, "os.PathLike[str]", Mapping[str, Any]]


# ------------------------------------------------------------ model files

@dataclass
class ModelFile:
    """One file of a model as the manifest records it.

    Its bytes come from `source` (a file on disk, read through a symlink) or
    from `data` (in memory), never both.
    """
    path: str                      # relative, '/'-separated, as the user sees it
    size: int
    source: Optional[str] = None
    data: Optional[bytes] = None

    def read(self, offset: int, size: int) -> Iterator[bytes]:
        """The bytes [offset, offset + size) in pieces of at most 4 MiB."""
        if self.data is not None:
            view = memoryview(self.data)
            for at in range(offset, offset + size, MAX_CHUNK_BYTES):
                yield view[at:min(at + MAX_CHUNK_BYTES, offset + size)]
            return
        assert self.source is not None
        with open(self.source, "rb") as f:
            f.seek(offset)
            left = size
            while left:
                piece = f.read(min(MAX_CHUNK_BYTES, left))
                if not piece:
                    raise InvalidArgument.local(
                        f"'{_escape(self.source)}' became shorter while it was imported")
                left -= len(piece)
                yield piece

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for piece in self.read(0, self.size):
            digest.update(piece)
        return digest.hexdigest()


def _escape(name: str) -> str:
    """`name` for an error message: undecodable bytes and control characters as \\xHH."""
    raw = os.fsencode(name)
    text = raw.decode("utf-8", errors="backslashreplace")
    return "".join(f"\\x{ord(c):02X}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)


def _os_error(what: str, path: str, error: OSError) -> InvalidArgument:
    return InvalidArgument.local(f"cannot import: {what} '{_escape(path)}': "
                                 f"{error.strerror or error}")


def _walk(directory: str, rel: str, out: List[ModelFile]) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError as e:
        raise _os_error("cannot read directory", directory, e) from e
    for entry in entries:
        full = os.path.join(directory, entry.name)
        path = f"{rel}/{entry.name}" if rel else entry.name
        try:
            entry.name.encode("utf-8")  # a non-UTF-8 name decodes to lone surrogates
        except UnicodeEncodeError:
            raise InvalidArgument.local(
                f"cannot import '{_escape(full)}': the file name is not UTF-8 (the bytes "
                "shown as \\xHH); rename it") from None
        try:
            link = os.lstat(full)
        except OSError as e:
            raise _os_error("cannot stat", full, e) from e
        target = link
        if stat.S_ISLNK(link.st_mode):
            try:
                target = os.stat(full)
            except OSError as e:
                raise _os_error("dangling symlink", full, e) from e
        if stat.S_ISDIR(target.st_mode):
            if stat.S_ISLNK(link.st_mode):
                raise InvalidArgument.local(
                    f"cannot import '{_escape(full)}': a symlink to a directory is not "
                    "followed; link the files instead")
            _walk(full, path, out)
            continue
        if not stat.S_ISREG(target.st_mode):
            raise InvalidArgument.local(f"cannot import '{_escape(full)}': not a regular file, "
                                        "directory or symlink to a file")
        try:
            os.close(os.open(full, os.O_RDONLY | os.O_CLOEXEC))  # readable, or say so now
        except OSError as e:
            raise _os_error("cannot open", full, e) from e
        out.append(ModelFile(path, target.st_size, source=full))


def walk_model_directory(directory: Union[str, "os.PathLike[str]"]) -> List[ModelFile]:
    """Every file under `directory`, in path order (bytewise), checked readable."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise InvalidArgument.local(f"DIR '{directory}' is not a directory")
    files: List[ModelFile] = []
    _walk(directory, "", files)
    files.sort(key=lambda f: f.path.encode("utf-8"))
    if not files:
        raise InvalidArgument.local(f"DIR '{directory}' has no files")
    return files


def is_safe_relative_path(path: str) -> bool:
    """True when `path` is relative with no empty, "." or ".." segment ("w..v2.bin" is fine)."""
    return bool(path) and all(seg not in ("", ".", "..") for seg in path.split("/"))


def _safetensors_name(name: str) -> str:
    return name if name.endswith(".safetensors") else name + ".safetensors"


def model_files_from_mapping(contents: Mapping[str, Any]) -> List[ModelFile]:
    """The files of an in-memory model ``{path: content}``, in path order.

    Content may be:
      - bytes (bytearray, memoryview): the file's bytes as they are;
      - a numpy array: a safetensors file holding that one tensor, named by the
        path without ".safetensors"; the file's path gets ".safetensors"
        appended unless it ends with it (``{"embed": a}`` → embed.safetensors
        with tensor "embed");
      - a mapping {tensor name: numpy array}: a safetensors file of those
        tensors, under the same path rule;
      - a pathlib.Path (os.PathLike): that file on disk, read through symlinks.
    """
    files: Dict[str, ModelFile] = {}
    for name, value in contents.items():
        if isinstance(value, (bytes, bytearray, memoryview)):
            path, data = name, bytes(value)
        elif isinstance(value, np.ndarray):
            path = _safetensors_name(name)
            data = safetensors.dumps({path[: -len(".safetensors")]: value})
        elif isinstance(value, Mapping):
            path, data = _safetensors_name(name), safetensors.dumps(value)
        elif isinstance(value, os.PathLike):
            source = os.fspath(value)
            try:
                size = os.stat(source).st_size
                os.close(os.open(source, os.O_RDONLY | os.O_CLOEXEC))
            except OSError as e:
                raise _os_error("cannot open", source, e) from e
            if not is_safe_relative_path(name):
                raise InvalidArgument.local(f"'{name}' is not a safe relative path")
            files[name] = ModelFile(name, size, source=source)
            continue
        else:
            raise TypeError(f"{name!r}: a model file is bytes, a numpy array, a dict of arrays "
                            f"or a pathlib.Path, not {type(value).__name__}")
        if not is_safe_relative_path(path):
            raise InvalidArgument.local(f"'{path}' is not a safe relative path (no empty, '.' "
                                        "or '..' segment, not absolute)")
        if path in files:
            raise InvalidArgument.local(f"two entries become the file '{path}'")
        files[path] = ModelFile(path, len(data), data=data)
    if not files:
        raise InvalidArgument.local("the model has no files")
    return sorted(files.values(), key=lambda f: f.path.encode("utf-8"))


def model_files(source: Source) -> List[ModelFile]:
    """The files of a directory path or of an in-memory mapping (see above)."""
    if isinstance(source, Mapping):
        return model_files_from_mapping(source)
    return walk_model_directory(source)


__all__ = ["ModelFile", "Source", "walk_model_directory", "model_files",
           "model_files_from_mapping", "is_safe_relative_path"]
