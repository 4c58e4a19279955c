// Every request a client can send goes through one validation boundary: the
// conversion from the wire (api/convert) and the pure decide functions of the
// actors. Whatever the bytes, the answer is a command or an error with a
// message — never a crash or an exception — and every decision the decide
// functions take folds cleanly into a state that keeps every invariant.
//
// Input: one byte choosing the request type, then its serialized message.
#include <cstddef>
#include <cstdint>
#include <string>

#include "quiet_protobuf.hpp"
#include "actors/lease_decide.hpp"
#include "actors/revision_decide.hpp"
#include "api/convert.hpp"
#include "events/revision_state.hpp"

using namespace weightd;

namespace {

struct fixture {
  events::revision_index index;
  events::revision_key importing{"default", "default", "model", "main", 1};
  uint64_t seq = 0, op_ids = 0, lease_ids = 0;

  fixture() {
    actors::begin_import begin{importing, "", 2, 100, false, {}, 0, "fuzz", ""};
    auto d = actors::decide_begin(nullptr, begin, context());
    if (!d.ok() || !fold(index, *d)) __builtin_trap();
  }
  actors::decide_context context() {
    return {1'000'000, {}, [this] { return ++op_ids; }, [this] { return ++lease_ids; }};
  }
  bool fold(events::revision_index& into, const actors::decision& d) {
    uint64_t at = seq;
    for (auto e : d.events) {
      e.set_global_seq(++at);
      e.set_timestamp_ms(1'000'000);
      if (!events::evolve_revisions(into, e).ok()) return false;
      if (auto* r = into.find(events::revision_of(e)))
        if (!events::check_invariants(*r, into).ok()) return false;
    }
    return true;
  }
  /// A decision must fold; an error must say what is wrong.
  template <class T>
  void check(const result<T>& d) {
    if (!d.ok()) {
      if (d.error().message().empty()) __builtin_trap();
      return;
    }
    if constexpr (std::is_same_v<T, actors::decision>) {
      auto copy = index;
      if (!fold(copy, *d)) __builtin_trap();
    }
  }
  /// The command against no revision and against the importing one.
  template <class Cmd, class Decide>
  void decide(Cmd cmd, Decide decide_fn) {
    check(decide_fn(static_cast<const events::revision_record*>(nullptr), cmd));
    cmd.id = importing;
    check(decide_fn(index.find(importing), cmd));
  }
};

template <class Request>
bool parse(Request& req, const uint8_t* data, size_t size) {
  return req.ParseFromArray(data, static_cast<int>(size));
}

template <class Result>
void must_explain(const Result& r) {
  if (!r.ok() && r.error().message().empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static fixture f;
  auto ctx = f.context();
  uint8_t which = data[0] % 17;
  ++data;
  --size;
  switch (which) {
    case 0: {
      v1::BeginImportRequest req;
      if (!parse(req, data, size)) return 0;
      auto cmd = api::from_proto(req);
      must_explain(cmd);
      if (cmd.ok()) f.decide(*cmd, [&](auto* r, auto& c) { return actors::decide_begin(r, c, ctx); });
      break;
    }
    case 1: {
      v1::CommitImportRequest req;
      if (!parse(req, data, size)) return 0;
      auto cmd = api::from_proto(req);
      must_explain(cmd);
      if (cmd.ok()) f.decide(*cmd, [&](auto* r, auto& c) { return actors::precheck_commit(r, c); });
      break;
    }
    case 2: {
      v1::AbortImportRequest req;
      if (!parse(req, data, size)) return 0;
      auto cmd = api::from_proto(req);
      must_explain(cmd);
      if (cmd.ok()) f.decide(*cmd, [&](auto* r, auto& c) { return actors::decide_abort(r, c, ctx); });
      break;
    }
    case 3: {
      v1::UpdatePolicyRequest req;
      if (!parse(req, data, size)) return 0;
      auto cmd = api::from_proto(req);
      must_explain(cmd);
      if (cmd.ok())
        f.decide(*cmd, [&](auto* r, auto& c) { return actors::decide_update_policy(r, c, ctx); });
      break;
    }
    case 4: {
      v1::RemoveRevisionRequest req;
      if (!parse(req, data, size)) return 0;
      auto cmd = api::from_proto(req);
      must_explain(cmd);
      if (cmd.ok()) f.decide(*cmd, [&](auto* r, auto& c) { return actors::decide_remove(r, c, ctx); });
      break;
    }
    case 5: {
      v1::MigrateRequest req;
      if (!parse(req, data, size)) return 0;
      auto cmd = api::from_proto(req);
      must_explain(cmd);
      if (cmd.ok())
        f.decide(*cmd, [&](auto* r, auto& c) { return actors::decide_migrate(r, f.index, c, ctx); });
      break;
    }
    case 6: {
      v1::AcquireLeaseRequest req;
      if (!parse(req, data, size)) return 0;
      auto cmd = api::from_proto(req);
      must_explain(cmd);
      if (cmd.ok()) f.decide(*cmd, [&](auto* r, auto& c) { return actors::decide_acquire(r, c, ctx); });
      break;
    }
    case 7: {
      v1::RenewLeaseRequest req;
      if (!parse(req, data, size)) return 0;
      auto cmd = api::from_proto(req);
      must_explain(cmd);
      if (cmd.ok()) f.check(actors::decide_renew(*f.index.find(f.importing), *cmd, ctx));
      break;
    }
    case 8: {
      v1::RevokeLeaseRequest req;
      if (!parse(req, data, size)) return 0;
      auto cmd = api::from_proto(req);
      must_explain(cmd);
      if (cmd.ok()) f.check(actors::decide_revoke(*f.index.find(f.importing), *cmd, ctx));
      break;
    }
    case 9: { v1::GetRevisionRequest req; if (parse(req, data, size)) must_explain(api::from_proto(req)); break; }
    case 10: { v1::ListRevisionsRequest req; if (parse(req, data, size)) must_explain(api::from_proto(req)); break; }
    case 11: { v1::ReleaseLeaseRequest req; if (parse(req, data, size)) must_explain(api::from_proto(req)); break; }
    case 12: { v1::ListLeasesRequest req; if (parse(req, data, size)) must_explain(api::from_proto(req)); break; }
    case 13: { v1::GetOperationRequest req; if (parse(req, data, size)) must_explain(api::from_proto(req)); break; }
    case 14: { v1::CancelOperationRequest req; if (parse(req, data, size)) must_explain(api::from_proto(req)); break; }
    case 15: { v1::ReconcileRequest req; if (parse(req, data, size)) must_explain(api::from_proto(req)); break; }
    case 16: { v1::PutHeader req; if (parse(req, data, size)) must_explain(api::from_proto(req)); break; }
  }
  return 0;
}
