"""Identity (SPEC §1) and the MIXED planner, computed as the C++ side does.

The expected digests are tests/identity_test.cpp's: both clients must name
the same group and manifest, or CommitImport refuses the import.
"""

import pytest

import weightd
from weightd import ids
from weightd.planner import plan_mixed


def key(tenant, ns, resource, revision, gen):
    return ids.RevisionId(tenant=tenant, ns=ns, resource=resource, revision=revision,
                          weight_generation=gen)


def test_payload_group_id_matches_the_cpp_vectors():
    assert ids.payload_group_id(key("default", "default", "llama-3-8b", "main", 1)) == \
        "weight:ec528334c7fa51f9b43d8b5f3e4a4c89f902b8bb718b989a9bac1628ccf59da3"
    assert ids.payload_group_id(key("acme", "prod", "qwen/7b", "v 2", 42)) == \
        "weight:97c7ec238ede9bb6cdd0d438e3ae754965e1745b73d0eb6938497b411a5d78be"


def test_payload_keys_sha256_sorts_bytewise():
    assert ids.payload_keys_sha256(["b/1", "a/2", "a/10"]) == \
        "cde3114249d4de2bb99f25714c977a5750f6c0a3ae530b8efc13045550f1f958"


def test_manifest_key_and_files_prefix_percent_encode():
    assert ids.manifest_key(key("t", "prod", "qwen/7b", "v 2~x", 42)) == \
        "weights/prod/qwen%2F7b/v%202~x/42/manifest"
    assert ids.percent_encode("/é") == "%2F%C3%A9"
    assert ids.files_prefix(key("default", "default", "m", "main", 3)) == \
        "weights/default/m/main/3/files/"


def test_canonical_text_round_trips():
    assert ids.format_id(key("default", "default", "llama-3-8b", "main", 1)) == \
        "default/llama-3-8b@main#1"
    assert ids.format_id(key("acme", "prod", "m", "r", 3)) == "acme:prod/m@r#3"
    assert ids.parse_id("acme:prod/m@r#3") == key("acme", "prod", "m", "r", 3)
    no_gen = ids.parse_id("ns/res@rev")
    assert (no_gen.tenant, no_gen.weight_generation) == ("default", 0)
    # The client's tenant applies when the text names none.
    assert ids.parse_id("ns/res@rev#2", tenant="acme").tenant == "acme"
    # "" = left to the daemon (a client with a token: the credential's tenant).
    assert ids.parse_id("ns/res@rev#2", tenant="") == key("", "ns", "res", "rev", 2)
    assert ids.parse_id("acme:ns/res@rev", tenant="").tenant == "acme"
    # The resource runs from the first '/' to the last '@'.
    hf = ids.parse_id("hf/meta-llama/Llama-3@main")
    assert (hf.ns, hf.resource, hf.revision) == ("hf", "meta-llama/Llama-3", "main")


@pytest.mark.parametrize("text, why", [
    ("no-slash@x", "no '/'"), ("ns/res", "no '@'"), ("ns/res@rev#x", "generation"),
    ("ns/res@rev#0", "generation 0"), ("ns/@rev", "an empty part"),
    (":ns/res@rev", "an empty part"),
])
def test_malformed_text_is_invalid_argument(text, why):
    with pytest.raises(weightd.InvalidArgument) as e:
        ids.parse_id(text)
    assert why in e.value.message and e.value.grpc_status is None


# The vectors of tests/mixed_planner_test.cpp.
@pytest.mark.parametrize("units, ratio, hot", [
    ([("a", 1), ("b", 2), ("c", 10)], 0.5, {"c"}),                    # the largest seeds
    ([("c", 2), ("a", 8), ("d", 1), ("b", 4)], 0.6, {"a", "d"}),       # strictly closer only
    ([("a", 10), ("b", 1), ("c", 1)], 0.99, {"a", "c"}),               # one unit stays COLD
    ([("a", 10), ("b", 1), ("c", 1)], 0.01, {"b"}),
    ([("a", 5), ("b", 5)], 0.99, {"b"}),
    ([("a", 8), ("b", 4), ("c", 2), ("d", 1)], 0.25, {"b"}),           # a swap beats greedy
    ([("a", 6), ("b", 5), ("c", 4), ("d", 3)], 0.5, {"b", "c"}),       # ties: removed id
    ([("b", 6), ("a", 5), ("c", 4), ("d", 3)], 0.5, {"b", "d"}),
    ([("a", 10), ("y", 1), ("x", 1)], 0.01, {"x"}),                    # ties: added id
    ([("b", 5), ("a", 5)], 0.5, {"a"}),
])
def test_mixed_planner_matches_the_cpp_planner(units, ratio, hot):
    assert plan_mixed(units, ratio) == hot


def test_mixed_planner_refuses_what_it_cannot_plan():
    with pytest.raises(weightd.PolicyUnsatisfiable):
        plan_mixed([("a", 1)], 0.5)
    with pytest.raises(weightd.InvalidArgument):
        plan_mixed([("a", 1), ("b", 2)], 1.0)
    with pytest.raises(weightd.InvalidArgument):
        plan_mixed([("a", 1), ("a", 2)], 0.5)
