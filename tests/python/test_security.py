"""SPEC §9 against the real daemon: bearer tokens, roles, tenants from the
credential, Watch filtered to the caller's tenant, TLS and mutual TLS.

One daemon with a tokens file serves the token tests (module-scoped); the TLS
test starts its own with certificates made by the `openssl` command line in
tmp_path. Tokens here are test values, nothing secret.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List

import pytest

import weightd
from conftest import WEIGHTD_BIN, Daemon, free_port

TOKENS = {
    "acme-reader": ("acme-reader-token-0001", "acme", "reader"),
    "acme-writer": ("acme-writer-token-0001", "acme", "writer"),
    "globex-writer": ("globex-writer-token-01", "globex", "writer"),
    "ops": ("ops-admin-token-000001", "default", "admin"),
}

MODEL = {"config.json": b'{"hidden_size": 8}\n', "weights.bin": bytes(range(256)) * 8}


def write_tokens(path: Path, entries: Dict[str, tuple]) -> Path:
    """The tokens file (token,name,tenant,role), created with mode 0600."""
    lines = ["# test tokens"] + [f"{token},{name},{tenant},{role}"
                                 for name, (token, tenant, role) in entries.items()]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path


def token(name: str) -> str:
    return TOKENS[name][0]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    root = tmp_path_factory.mktemp("secured")
    tokens = write_tokens(root / "tokens.csv", TOKENS)
    d = Daemon(root / "weightd", ["--auth-tokens-file", str(tokens)])
    d.tokens_file = tokens  # type: ignore[attr-defined]
    d.start()
    yield d
    d.stop()


@pytest.fixture(scope="module")
def as_user(secured: Daemon) -> Iterator[Callable[..., weightd.Client]]:
    """as_user(name, **options): a client with that token, closed at the end."""
    clients: List[weightd.Client] = []

    def make(name: str, **options) -> weightd.Client:
        c = secured.client(token=token(name), attempts=1, **options)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def envelope_tenant(envelope: weightd.events_pb2.Envelope) -> str:
    """The tenant an envelope's stream names ("revision|acme:ns/r@v#1", "object|acme/key")."""
    kind, _, rest = envelope.stream.partition("|")
    if kind == "object":
        return rest.split("/", 1)[0]
    if kind == "revision":
        colon, slash = rest.find(":"), rest.find("/")
        return rest[:colon] if 0 <= colon < slash else "default"
    return ""  # the system stream


# ------------------------------------------------------ client, offline

def test_the_clients_tenant_with_and_without_a_token(monkeypatch) -> None:
    monkeypatch.delenv("WEIGHTD_TENANT", raising=False)
    monkeypatch.delenv("WEIGHTD_TOKEN", raising=False)
    address = f"127.0.0.1:{free_port()}"  # no call is made
    with weightd.Client(address) as c:  # security off: unchanged
        assert (c.has_token, c.tenant, c.id("ns/r@v").tenant) == (False, "default", "default")
    with weightd.Client(address, token=token("acme-reader")) as c:  # the credential's
        assert (c.has_token, c.tenant, c.id("ns/r@v").tenant) == (True, "", "")
        assert c.id("globex:ns/r@v").tenant == "globex"
        assert c.id(weightd.events_pb2.RevisionId(ns="ns", resource="r", revision="v")).tenant == ""
        assert weightd.format_id(c.id("ns/r@v#2")) == "ns/r@v#2"
    with weightd.Client(address, "acme", token=token("acme-reader")) as c:  # chosen
        assert c.id("ns/r@v").tenant == "acme"
    monkeypatch.setenv("WEIGHTD_TENANT", "acme")  # the environment chooses too
    with weightd.Client(address, token=token("acme-reader")) as c:
        assert c.tenant == "acme"
    with pytest.raises(weightd.InvalidArgument, match="an empty part"):
        weightd.parse_id(":ns/r@v", tenant="")


# --------------------------------------------------------------- tokens

def test_no_token_or_an_unknown_one_is_unauthenticated(secured: Daemon) -> None:
    with secured.client(token="", attempts=1) as anonymous:
        with pytest.raises(weightd.Unauthenticated, match="authorization: Bearer"):
            anonymous.status()
        with pytest.raises(weightd.Unauthenticated):
            weightd.weight_list("models", client=anonymous)
        with pytest.raises(weightd.Unauthenticated):  # a stream too
            anonymous.get_object(tenant="acme", key="whatever")
    with secured.client(token="not-a-known-token-at-all", attempts=1) as stranger:
        with pytest.raises(weightd.Unauthenticated, match="not known"):
            stranger.status()


def test_the_token_comes_from_the_environment(secured: Daemon, monkeypatch) -> None:
    monkeypatch.setenv("WEIGHTD_TOKEN", token("acme-reader"))
    monkeypatch.delenv("WEIGHTD_TENANT", raising=False)
    monkeypatch.setenv("WEIGHTD_ADDRESS", secured.address)
    saved = weightd.surface._default  # another test's default client, if any
    weightd.set_default_client(None)
    try:
        c = weightd.default_client()
        assert c.has_token and c.tenant == ""
        assert c.status().journal_seq >= 0
        assert weightd.weight_list("nothing-here") == []
        c.close()
    finally:
        weightd.set_default_client(saved)
    with weightd.Client(secured.address, token="") as none:  # "" beats the environment
        assert not none.has_token and none.tenant == "default"


def test_a_reader_cannot_put(as_user, tmp_path: Path) -> None:
    reader = as_user("acme-reader")
    with pytest.raises(weightd.PermissionDenied, match="writer") as refused:
        weightd.weight_put(MODEL, "models/refused@main", client=reader)
    assert "BeginImport" in refused.value.message
    with pytest.raises(weightd.PermissionDenied, match="writer"):
        reader.put_object(b"x", key="objects/refused")
    with pytest.raises(weightd.PermissionDenied, match="admin"):
        reader.snapshot()
    assert weightd.weight_list("refused-ns", client=reader) == []  # reading is allowed


def test_a_writer_puts_and_gets_with_ids_naming_no_tenant(as_user, tmp_path: Path) -> None:
    writer = as_user("acme-writer")
    assert writer.tenant == "" and writer.id("default/tiny@main").tenant == ""
    view = weightd.weight_put(MODEL, "default/tiny@main", client=writer)
    assert (view.id.tenant, view.id.ns, view.id.resource, view.id.weight_generation) == \
        ("acme", "default", "tiny", 1)
    with weightd.weight_get("default/tiny@main", ttl=10, client=writer) as rev:
        assert rev.id.tenant == "acme"
        assert rev.read("config.json") == MODEL["config.json"]
        assert rev.read("weights.bin") == MODEL["weights.bin"]
    # A reader of the same tenant sees it under the same tenant-less id.
    reader = as_user("acme-reader")
    with weightd.weight_get("default/tiny@main", ttl=10, client=reader) as rev:
        assert rev.read("config.json") == MODEL["config.json"]
    assert [v.id.tenant for v in weightd.weight_list("default", "tiny", client=reader)] == ["acme"]
    # Naming one's own tenant, in the id or in the client, is the same revision.
    assert weightd.weight_get_metadata("acme:default/tiny@main", client=reader).id == view.id
    with weightd.Client(writer.address, "acme", token=token("acme-reader")) as c:
        assert c.tenant == "acme"
        assert weightd.weight_get_metadata("default/tiny@main", client=c).id == view.id
    with weightd.Client(writer.address, "globex", token=token("acme-reader"), attempts=1) as c:
        with pytest.raises(weightd.PermissionDenied, match="globex"):
            weightd.weight_get_metadata("default/tiny@main", client=c)
    # Objects: the tenant left empty is the credential's.
    info = writer.put_object(b"hello", key="objects/greeting")
    assert info.tenant == "acme"
    assert writer.get_object(key="objects/greeting")[1] == b"hello"
    assert writer.stat_object(tenant="acme", key="objects/greeting").size == 5


def test_two_tenants_side_by_side(as_user) -> None:
    acme, globex = as_user("acme-writer"), as_user("globex-writer")
    a = weightd.weight_put(MODEL, "models/shared@main", client=acme)
    g = weightd.weight_put({"other.bin": b"globex bytes"}, "models/shared@main", client=globex)
    weightd.weight_put({"x.bin": b"x"}, "models/globex-only@main", client=globex)
    assert (a.id.tenant, g.id.tenant) == ("acme", "globex")
    # Each lists only its own.
    assert [(v.id.tenant, v.id.resource) for v in weightd.weight_list("models", client=acme)] == \
        [("acme", "shared")]
    assert sorted((v.id.tenant, v.id.resource)
                  for v in weightd.weight_list("models", client=globex)) == \
        [("globex", "globex-only"), ("globex", "shared")]
    # The same name is two revisions: each reads its own bytes.
    with weightd.weight_get("models/shared@main", ttl=10, client=globex) as rev:
        assert rev.read("other.bin") == b"globex bytes"
    # The other tenant's id, or a list of its revisions, is refused.
    with pytest.raises(weightd.PermissionDenied, match="globex"):
        weightd.weight_get_metadata("globex:models/shared@main", client=acme)
    with pytest.raises(weightd.PermissionDenied):
        with weightd.weight_get("globex:models/globex-only@main", client=acme):
            pass
    with pytest.raises(weightd.PermissionDenied):
        weightd.weight_list("models", tenant="globex", client=acme)
    with pytest.raises(weightd.PermissionDenied):
        acme.get_object(tenant="globex", key="weights/models/shared/main/1/manifest")
    # A lease of the other tenant, named by its id, is unknown: renewing it is
    # NotFound, releasing it the no-op releasing an unknown lease is.
    with weightd.weight_get("models/shared@main", ttl=10, client=acme) as rev:
        lease_id = rev.lease.lease_id
        with pytest.raises(weightd.NotFound):
            globex.renew_lease(lease_id=lease_id, ttl_ms=1000)
        globex.release_lease(lease_id=lease_id)
        assert acme.renew_lease(lease_id=lease_id, ttl_ms=10000).lease_id == lease_id
        assert [l.lease_id for l in acme.list_leases(id=rev.id).leases] == [lease_id]
    # An admin reads any tenant.
    ops = as_user("ops")
    assert [v.id.tenant for v in weightd.weight_list("models", tenant="globex", client=ops)] == \
        ["globex", "globex"]


def _collect(w: weightd.Watch, until: Callable[[weightd.events_pb2.Envelope], bool],
             limit: float = 10.0) -> List[weightd.events_pb2.Envelope]:
    """Envelopes of `w` up to the first one `until` accepts (closed after `limit` s)."""
    timer = threading.Timer(limit, w.close)
    timer.start()
    got: List[weightd.events_pb2.Envelope] = []
    try:
        for envelope in w:
            got.append(envelope)
            if until(envelope):
                return got
    finally:
        timer.cancel()
        w.close()
    raise AssertionError(f"no awaited event within {limit} s; got {[e.stream for e in got]}")


def test_watch_yields_only_the_callers_tenant(as_user) -> None:
    acme, globex = as_user("acme-writer"), as_user("globex-writer")
    with weightd.watch(client=acme) as wa, weightd.watch(client=globex) as wg:
        weightd.weight_put({"g.bin": b"g"}, "watched/globex-first@main", client=globex)
        weightd.weight_put({"a.bin": b"a"}, "watched/acme@main", client=acme)
        globex.put_object(b"marker", key="objects/globex-marker")
        seen_a = _collect(wa, lambda e: e.HasField("import_committed"))
        seen_g = _collect(wg, lambda e: e.stream.endswith("objects/globex-marker"))
    assert {envelope_tenant(e) for e in seen_a} == {"acme"}
    assert any("watched/acme@main" in e.stream for e in seen_a)
    assert {envelope_tenant(e) for e in seen_g} == {"globex"}
    assert any(e.HasField("import_committed") and "globex-first" in e.stream for e in seen_g)


def test_tokens_file_reloaded_on_sighup_and_refused_when_readable(secured: Daemon,
                                                                  tmp_path: Path) -> None:
    newcomer = "newcomer-token-000001"
    with secured.client(token=newcomer, attempts=1) as c:
        with pytest.raises(weightd.Unauthenticated):
            c.status()
        write_tokens(secured.tokens_file, {**TOKENS, "newcomer": (newcomer, "acme", "reader")})
        secured.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while True:
            try:
                c.status()
                break
            except weightd.Unauthenticated:
                assert time.monotonic() < deadline, "SIGHUP did not reload the tokens file"
                time.sleep(0.05)
    # A tokens file others may read: the daemon does not start.
    loose = write_tokens(tmp_path / "loose.csv", TOKENS)
    os.chmod(loose, 0o644)
    result = subprocess.run(
        [WEIGHTD_BIN, "--data-dir", str(tmp_path / "data"), "--hot-dir", str(tmp_path / "hot"),
         "--listen", f"127.0.0.1:{free_port()}", "--http-listen", f"127.0.0.1:{free_port()}",
         "--auth-tokens-file", str(loose)], capture_output=True, text=True, timeout=10)
    assert result.returncode != 0
    assert "chmod 600" in result.stdout + result.stderr


# ------------------------------------------------------------------ TLS

def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_certificates(d: Path) -> Dict[str, str]:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate."""
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
             "/CN=weightd test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                  "extendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=weightd test {name}",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "1", "-extfile", f"{name}.ext",
                 "-out", f"{name}.pem", cwd=d)
    return {name: str(d / name) for name in
            ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


def test_mutual_tls_end_to_end(start_daemon, tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "certs")
    tokens = write_tokens(tmp_path / "tokens.csv", TOKENS)
    d = start_daemon(["--auth-tokens-file", str(tokens),
                      "--tls-cert-file", certs["server.pem"], "--tls-key-file", certs["server.key"],
                      "--tls-client-ca-file", certs["ca.pem"]],
                     token=token("acme-writer"), tls_ca_file=certs["ca.pem"],
                     tls_cert_file=certs["client.pem"], tls_key_file=certs["client.key"])
    with d.client() as c:
        assert c.secure and c.status().journal_seq >= 1
        view = weightd.weight_put(MODEL, "tls/tiny@main", client=c)
        assert view.id.tenant == "acme"
        with weightd.weight_get("tls/tiny@main", ttl=10, client=c) as rev:
            assert rev.read("weights.bin") == MODEL["weights.bin"]
    # TLS without the client certificate: the handshake is refused.
    with d.client(tls_cert_file=None, tls_key_file=None, attempts=1, timeout=3.0) as c:
        with pytest.raises(weightd.Unavailable, match="tls_cert_file"):
            c.status()
    # No TLS at all.
    with weightd.Client(d.address, token=token("acme-writer"), attempts=1, timeout=3.0) as c:
        with pytest.raises(weightd.Unavailable):
            c.status()
    # The TLS files are checked before any call.
    with pytest.raises(weightd.InvalidArgument, match="go together"):
        weightd.Client(d.address, tls_cert_file=certs["client.pem"])
    with pytest.raises(weightd.InvalidArgument, match="cannot be read"):
        weightd.Client(d.address, tls_ca_file=str(tmp_path / "missing.pem"))
