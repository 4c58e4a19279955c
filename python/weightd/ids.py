"""Revision identity (SPEC §1), computed exactly as events/identity.cpp does.

These strings are part of the contract: the daemon checks a client's group id
and manifest key against its own, so they are computed here byte for byte
the same way. The text form is weightctl's:

    [tenant:]ns/resource@revision[#generation]     e.g. default/llama-3-8b@main#1

`tenant:` may be omitted (then the client's tenant: "default" unless you chose
another, or "" for a client with a token and no tenant of its own, which the
daemon fills with the credential's, SPEC §9), as may `#generation` (0 = "the
highest one", which the caller resolves). The resource is everything between the first '/' and the last '@',
so a resource may itself contain '/' (``hf/meta-llama/Llama-3@main``).
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Optional, Union

from ._proto import events_pb2
from .errors import InvalidArgument

RevisionId = events_pb2.RevisionId
#: What every function taking a revision accepts: the text form or the message.
IdLike = Union[str, "events_pb2.RevisionId"]

DEFAULT_TENANT = "default"
DEFAULT_NS = "default"


def _parse_decimal(digits: str) -> Optional[int]:
    # events::parse_decimal: 1..20 ASCII digits, no sign, no overflow past uint64.
    if not 1 <= len(digits) <= 20 or not all("0" <= c <= "9" for c in digits):
        return None
    value = int(digits)
    return value if value < 2 ** 64 else None


def parse_id(text: str, tenant: str = DEFAULT_TENANT) -> RevisionId:
    """Parses ``[tenant:]ns/resource@revision[#generation]`` (generation 0 when omitted).

    `tenant` is used when the text has no ``tenant:`` prefix; it may be ""
    (the tenant left to the daemon, which takes the caller's credential's),
    while a prefix may not be empty. Raises InvalidArgument with weightctl's
    wording when the text is not an id.
    """
    def bad(why: str) -> InvalidArgument:
        return InvalidArgument.local(
            f"'{text}' is not a revision id ({why}); write "
            "[tenant:]ns/resource@revision[#generation], e.g. default/llama-3-8b@main#1")

    rest = text
    slash = rest.find("/")
    if slash < 0:
        raise bad("no '/'")
    colon = rest.find(":")
    prefixed = 0 <= colon < slash
    if prefixed:
        tenant, rest = rest[:colon], rest[colon + 1:]
        slash = rest.find("/")
    ns, rest = rest[:slash], rest[slash + 1:]
    at = rest.rfind("@")
    if at < 0:
        raise bad("no '@'")
    resource, rest = rest[:at], rest[at + 1:]
    generation = 0
    hash_ = rest.rfind("#")
    if hash_ >= 0:
        parsed = _parse_decimal(rest[hash_ + 1:])
        if parsed is None:
            raise bad("the generation after '#' is not a number")
        if parsed == 0:
            raise bad("generation 0")
        generation, rest = parsed, rest[:hash_]
    if not all((ns, resource, rest)) or (prefixed and not tenant):
        raise bad("an empty part")
    return RevisionId(tenant=tenant, ns=ns, resource=resource, revision=rest,
                      weight_generation=generation)


def to_revision_id(value: IdLike, tenant: str = DEFAULT_TENANT) -> RevisionId:
    """A RevisionId from text or a message; an empty tenant or ns gets its default
    (`tenant` may itself be "": left to the daemon).

    The message is copied, so the caller's is never changed.
    """
    if isinstance(value, str):
        return parse_id(value, tenant)
    if isinstance(value, RevisionId):
        out = RevisionId()
        out.CopyFrom(value)
        out.tenant = out.tenant or tenant
        out.ns = out.ns or DEFAULT_NS
        return out
    raise TypeError(f"a revision id is a string or a RevisionId, not {type(value).__name__}")


def format_id(rid: RevisionId) -> str:
    """The canonical text (tenant omitted when "default", generation when 0)."""
    out = "" if rid.tenant in ("", DEFAULT_TENANT) else rid.tenant + ":"
    out += f"{rid.ns or DEFAULT_NS}/{rid.resource}@{rid.revision}"
    if rid.weight_generation:
        out += f"#{rid.weight_generation}"
    return out


def length_prefixed(x: str) -> bytes:
    """LP(x) = decimal(len(x)) ":" x "\\n", the length in UTF-8 bytes."""
    raw = x.encode("utf-8")
    return str(len(raw)).encode() + b":" + raw + b"\n"


def percent_encode(x: str) -> str:
    """Every byte outside [A-Za-z0-9-_.~] as %XX (uppercase hex)."""
    plain = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~"
    return "".join(chr(b) if b in plain else f"%{b:02X}" for b in x.encode("utf-8"))


def payload_group_id(rid: RevisionId) -> str:
    """"weight:" + hex(sha256(LP(tenant) LP(ns) LP(resource) LP(revision) LP(generation)))."""
    digest = hashlib.sha256()
    for part in (rid.tenant, rid.ns, rid.resource, rid.revision, str(rid.weight_generation)):
        digest.update(length_prefixed(part))
    return "weight:" + digest.hexdigest()


def manifest_key(rid: RevisionId) -> str:
    """weights/<enc(ns)>/<enc(resource)>/<enc(revision)>/<generation>/manifest."""
    return (f"weights/{percent_encode(rid.ns)}/{percent_encode(rid.resource)}/"
            f"{percent_encode(rid.revision)}/{rid.weight_generation}/manifest")


def files_prefix(rid: RevisionId) -> str:
    """Where `weightctl import` puts a revision's files: the manifest's folder + "files/".

    The file paths after it are not encoded (api/cli/import_command.cpp).
    """
    return manifest_key(rid)[: -len("manifest")] + "files/"


def payload_keys_sha256(keys: Iterable[str]) -> str:
    """hex(sha256 of LP(key) over the keys sorted bytewise)."""
    digest = hashlib.sha256()
    for key in sorted(keys, key=lambda k: k.encode("utf-8")):
        digest.update(length_prefixed(key))
    return digest.hexdigest()
