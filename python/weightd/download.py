"""A revision's files out, as `weightctl export` writes them: the manifest
object parsed and its paths checked, then every file written under a
directory and checked against its sha256 before any is renamed into place
(LeasedRevision.export in lease.py fetches the bytes).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Callable, List, Tuple, Union

from google.protobuf import json_format

from . import ids
from ._proto import events_pb2 as ev
from ._proto import weightd_pb2 as pb
from .errors import DataLoss
from .model_files import _escape, is_safe_relative_path

# -------------------------------------------------------------- export

def parse_manifest(text: bytes, rid: ev.RevisionId) -> pb.ModelManifest:
    """The manifest object's JSON as a ModelManifest; DataLoss when it is none, or when
    a path is unsafe (checked before anything is written, as weightctl does)."""
    manifest = pb.ModelManifest()
    try:
        json_format.Parse(text.decode("utf-8"), manifest)
    except (json_format.ParseError, UnicodeDecodeError) as e:
        raise DataLoss.local(f"the manifest of {ids.format_id(rid)} is not a weightctl model "
                             f"manifest ({e})") from e
    for f in manifest.files:
        if not is_safe_relative_path(f.path):
            raise DataLoss.local(
                f"the manifest of {ids.format_id(rid)} names an unsafe path '{_escape(f.path)}' "
                "(an empty, '.' or '..' segment, or absolute)")
    return manifest


#: write_chunk(chunk, sink): calls sink(bytes) with the payload's bytes, in order.
ChunkWriter = Callable[[pb.ManifestChunk, Callable[[bytes], Any]], None]


def export_manifest(manifest: pb.ModelManifest, directory: Union[str, "os.PathLike[str]"],
                    write_chunk: ChunkWriter, check: Callable[[], None]) -> Tuple[int, int]:
    """Writes every file of `manifest` under `directory`; returns (files, bytes).

    Each file is written under a temporary name with its sha256 computed on
    the way; only when every file matched the manifest are they renamed into
    place, so a failed export leaves none of its files behind. `check` is
    called between pieces (it raises when the lease was lost).
    """
    directory = os.fspath(directory)
    pending: List[Tuple[str, str]] = []  # (temp, target)
    total = 0
    try:
        for f in manifest.files:
            target = os.path.join(directory, *f.path.split("/"))
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            temp = target + ".weightd-partial"
            pending.append((temp, target))
            digest = hashlib.sha256()
            size = 0
            with open(temp, "wb") as out:
                def sink(piece: bytes) -> None:
                    nonlocal size
                    check()
                    out.write(piece)
                    digest.update(piece)
                    size += len(piece)
                for chunk in f.chunks:
                    write_chunk(chunk, sink)
            if digest.hexdigest() != f.sha256 or size != f.size:
                raise DataLoss.local(f"'{f.path}' failed its sha256 check; the revision may be "
                                     "damaged: look at its availability and retry")
            total += size
        for temp, target in pending:
            os.replace(temp, target)
        pending.clear()
    finally:
        for temp, _ in pending:
            try:
                os.remove(temp)
            except FileNotFoundError:
                pass
    return len(manifest.files), total


__all__ = ["parse_manifest", "ChunkWriter", "export_manifest"]
