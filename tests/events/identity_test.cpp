// SPEC §1: identity, canonical text and the derived names. Expected digests
// were computed independently (Python hashlib) from the SPEC's formulas.
#include <doctest/doctest.h>

#include "events/identity.hpp"

using namespace weightd;
using namespace weightd::events;

namespace {
revision_key key(std::string tenant, std::string ns, std::string resource, std::string revision,
                 uint64_t gen) {
  return {std::move(tenant), std::move(ns), std::move(resource), std::move(revision), gen};
}
}  // namespace

TEST_CASE("identity: payload_group_id is weight: + sha256 of the length-prefixed parts") {
  CHECK(payload_group_id(key("default", "default", "llama-3-8b", "main", 1)) ==
        "weight:ec528334c7fa51f9b43d8b5f3e4a4c89f902b8bb718b989a9bac1628ccf59da3");
  CHECK(payload_group_id(key("acme", "prod", "qwen/7b", "v 2", 42)) ==
        "weight:97c7ec238ede9bb6cdd0d438e3ae754965e1745b73d0eb6938497b411a5d78be");
}

TEST_CASE("identity: payload_keys_sha256 hashes the length-prefixed keys sorted bytewise") {
  CHECK(payload_keys_sha256({"b/1", "a/2", "a/10"}) ==
        "cde3114249d4de2bb99f25714c977a5750f6c0a3ae530b8efc13045550f1f958");
  CHECK(payload_keys_sha256({"a/10", "b/1", "a/2"}) == payload_keys_sha256({"b/1", "a/2", "a/10"}));
}

TEST_CASE("identity: the manifest key percent-encodes every byte outside A-Za-z0-9-_.~") {
  CHECK(manifest_key(key("default", "default", "llama-3-8b", "main", 1)) ==
        "weights/default/llama-3-8b/main/1/manifest");
  CHECK(manifest_key(key("t", "prod", "qwen/7b", "v 2~x", 42)) ==
        "weights/prod/qwen%2F7b/v%202~x/42/manifest");
  CHECK(percent_encode("\xff/é") == "%FF%2F%C3%A9");
}

TEST_CASE("identity: canonical text omits the default tenant and round-trips") {
  auto k = key("default", "default", "llama-3-8b", "main", 1);
  CHECK(canonical_text(k) == "default/llama-3-8b@main#1");
  CHECK(canonical_text(key("acme", "prod", "m", "r", 3)) == "acme:prod/m@r#3");
  CHECK(*parse_canonical_text("acme:prod/m@r#3") == key("acme", "prod", "m", "r", 3));
  CHECK(*parse_canonical_text("default/llama-3-8b@main#1") == k);
  auto no_gen = parse_canonical_text("ns/res@rev");
  REQUIRE(no_gen.ok());
  CHECK(no_gen->generation == 0);  // "the highest live generation"
  CHECK(no_gen->tenant == "default");
  CHECK(revision_stream(k) == "revision|default/llama-3-8b@main#1");
}

TEST_CASE("identity: malformed text and fields are refused, naming what is wrong") {
  CHECK(parse_canonical_text("no-slash@x").error().code() == errc::invalid_argument);
  CHECK(parse_canonical_text("ns/res").error().message().find("no '@'") != std::string::npos);
  CHECK(parse_canonical_text("ns/res@rev#x").error().message().find("generation") != std::string::npos);
  CHECK(parse_canonical_text("ns/res@rev#0").ok() == false);

  v1::RevisionId id;
  id.set_resource("m");
  id.set_revision("r");
  id.set_weight_generation(1);
  auto ok = checked_revision_key(id);
  REQUIRE(ok.ok());
  CHECK(ok->tenant == "default");
  CHECK(ok->ns == "default");
  id.set_revision(std::string(1025, 'r'));
  CHECK(checked_revision_key(id).error().message() == "id.revision is 1025 bytes; the limit is 1024");
  id.set_revision("bad\x01");
  CHECK(checked_revision_key(id).error().message() == "id.revision contains a control character");
  id.set_revision("r");
  id.set_weight_generation(0);
  CHECK(checked_revision_key(id).error().message() == "id.weight_generation must be at least 1");
  id.set_weight_generation(1);
  id.clear_resource();
  CHECK(checked_revision_key(id).error().message() == "id.resource is empty");
}
