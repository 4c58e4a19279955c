// The revision lifecycle on top of a running store: helpers that upload a
// revision's payloads and manifest and drive the registry like a client.
#pragma once

#include "events/digest.hpp"
#include "events/identity.hpp"
#include "store_fixture.hpp"

namespace weightd::test {

struct lifecycle_fixture : store_fixture {
  using view = actors::revision_view;

  explicit lifecycle_fixture(uint64_t hot_capacity_bytes = 64 << 20)
      : store_fixture(hot_capacity_bytes) {}

  actors::registry_actor registry() { return node->registry(); }

  static events::revision_key id(const std::string& resource = "llama-3-8b",
                                 const std::string& revision = "main", uint64_t gen = 1) {
    return {"default", "default", resource, revision, gen};
  }

  result<view> begin(const events::revision_key& rid, uint64_t count, uint64_t bytes,
                     std::optional<events::policy> policy = std::nullopt,
                     uint64_t affinity_count = 0) {
    actors::begin_import cmd;
    cmd.id = rid;
    cmd.expected_payload_count = count;
    cmd.expected_logical_bytes = bytes;
    if (policy) {
      cmd.has_policy = true;
      cmd.policy = *policy;
    }
    cmd.affinity_count = affinity_count;
    return ask<view>(registry(), cmd);
  }

  /// What an import uploaded: the commit's arguments.
  struct upload {
    events::manifest_ref manifest;
    std::vector<std::string> keys;
  };

  /// The tier payload puts ask for (UNSPECIFIED: the store decides).
  events::v1::Tier put_tier = events::v1::TIER_UNSPECIFIED;

  /// Puts `count` payloads of `size` bytes (one affinity unit each) and the
  /// manifest into the revision's group.
  upload put_revision(const events::revision_key& rid, int count, size_t size) {
    auto u = try_put_revision(rid, count, size);
    REQUIRE_MESSAGE(u.ok(), u.error().to_string());
    return *u;
  }
  /// put_revision, stopping at the first put that fails; with `resume`, each
  /// object is removed first (an upload started over after a crash: a put
  /// whose commit was cut may have left its key without a readable replica).
  result<upload> try_put_revision(const events::revision_key& rid, int count, size_t size,
                                  bool resume = false) {
    auto failed = [](const status& st) { return !st.ok(); };
    auto put = [&](const actors::put_request& req, const std::string& bytes) {
      if (resume) (void)remove(req.key, true);
      return store_fixture::put(req, bytes);
    };
    upload u;
    auto group = events::payload_group_id(rid);
    std::string manifest_body = "{\"files\":[";
    for (int i = 0; i < count; ++i) {
      auto key = "weights/" + rid.resource + "/" + rid.revision + "/" +
                 std::to_string(rid.generation) + "/part-" + std::to_string(i);
      auto req = request(key, pattern(size, i));
      req.group_id = group;
      req.data_type = events::v1::DATA_TYPE_WEIGHT;
      req.affinity_id = "file-" + std::to_string(i);
      req.tier = put_tier;
      auto put_result = put(req, pattern(size, i));
      if (!put_result.ok() && failed(put_result.error())) return put_result.error();
      u.keys.push_back(key);
      manifest_body += "\"" + key + "\",";
    }
    manifest_body += "]}";
    u.manifest.manifest_key = events::manifest_key(rid);
    auto req = request(u.manifest.manifest_key, manifest_body);
    req.group_id = group;
    req.data_type = events::v1::DATA_TYPE_METADATA;
    if (auto put_result = put(req, manifest_body); !put_result.ok() && failed(put_result.error()))
      return put_result.error();
    u.manifest.manifest_sha256 = events::sha256_hex(manifest_body);
    u.manifest.payload_keys_sha256 = events::payload_keys_sha256(u.keys);
    u.manifest.payload_count = static_cast<uint64_t>(count);
    u.manifest.logical_bytes = static_cast<uint64_t>(count) * size;
    return u;
  }

  result<view> commit(const events::revision_key& rid, uint64_t expected, const upload& u) {
    actors::commit_import cmd;
    cmd.id = rid;
    cmd.expected_generation = expected;
    cmd.manifest = u.manifest;
    cmd.payload_keys = u.keys;
    return ask<view>(registry(), cmd);
  }

  result<actors::removal_result> abort(const events::revision_key& rid, uint64_t expected,
                                       std::vector<std::string> keys = {}) {
    return ask<actors::removal_result>(registry(), actors::abort_import{rid, expected, keys, "", ""});
  }

  result<actors::removal_result> remove_rev(const events::revision_key& rid, uint64_t expected) {
    return ask<actors::removal_result>(registry(), actors::remove_revision{rid, expected, 0, "", ""});
  }

  result<view> set_policy(const events::revision_key& rid, uint64_t expected, events::policy p) {
    return ask<view>(registry(), actors::update_policy{rid, expected, p, "", ""});
  }

  result<actors::removal_result> remove_draining(const events::revision_key& rid, uint64_t expected,
                                                 int64_t drain_timeout_ms) {
    return ask<actors::removal_result>(
        registry(), actors::remove_revision{rid, expected, drain_timeout_ms, "", ""});
  }

  result<actors::lease_view> acquire(const events::revision_key& rid, const std::string& holder,
                                     uint64_t ttl_ms = 10'000, uint64_t expected = 0) {
    return ask<actors::lease_view>(registry(),
                                   actors::acquire_lease{rid, expected, holder, ttl_ms, "", ""});
  }
  result<actors::lease_view> renew(uint64_t lease_id, uint64_t ttl_ms) {
    return ask<actors::lease_view>(registry(), actors::renew_lease{lease_id, ttl_ms, "", ""});
  }
  result<actors::lease_view> release(uint64_t lease_id) {
    return ask<actors::lease_view>(registry(), actors::release_lease{lease_id, "", ""});
  }
  result<actors::lease_view> revoke(uint64_t lease_id) {
    return ask<actors::lease_view>(registry(), actors::revoke_lease{lease_id, "", "", ""});
  }
  result<actors::lease_list> leases(const events::revision_key& rid) {
    return ask<actors::lease_list>(registry(), actors::list_leases{rid});
  }

  /// Moves the fake wall clock and CAF's fake clock together, so the
  /// reconciler's rounds that fall due run.
  void pass_time(int64_t ms) {
    clock_ms += ms;
    sched.advance_time(std::chrono::milliseconds(ms));
    sched.run();
  }

  result<view> get_rev(const events::revision_key& rid, bool hidden = false) {
    return ask<view>(registry(), actors::get_revision{rid, hidden});
  }

  result<actors::revision_page> list(actors::list_revisions q = {}) {
    return ask<actors::revision_page>(registry(), q);
  }

  /// A READY revision with `count` payloads.
  std::pair<view, upload> ready(const events::revision_key& rid, int count = 3, size_t size = 1000,
                                std::optional<events::policy> policy = std::nullopt) {
    auto b = begin(rid, static_cast<uint64_t>(count), count * size, policy);
    REQUIRE_MESSAGE(b.ok(), b.error().to_string());
    auto u = put_revision(rid, count, size);
    auto c = commit(rid, b->record.metadata_generation, u);
    REQUIRE_MESSAGE(c.ok(), c.error().to_string());
    return {*c, u};
  }

  /// The registry's records: what the live system shows.
  std::map<events::revision_key, events::revision_record> live_revisions() {
    using impl = caf::stateful_actor<actors::registry_state, actors::registry_actor::base>;
    auto& st = dynamic_cast<impl&>(*caf::actor_cast<caf::abstract_actor*>(registry())).state;
    std::map<events::revision_key, events::revision_record> out;
    for (const auto& [k, v] : st.views) out[k] = v.record;
    return out;
  }
  std::map<events::revision_key, events::revision_record> folded_revisions(
      uint64_t until = persistence::kMaxSeq) {
    persistence::fold_options o;
    o.until_seq = until;
    auto state = persistence::fold_journal(*memory, o);
    REQUIRE_MESSAGE(state.ok(), state.error().to_string());
    return state->revisions.revisions;
  }
};

}  // namespace weightd::test
