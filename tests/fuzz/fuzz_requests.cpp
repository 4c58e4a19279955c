// Every request a client can send goes through one validation boundary: the
// conversion from the wire (api/convert), the command check the registry
// applies (core/validate.hpp) and the pure decide functions of the core. Whatever the bytes, the answer is a command or an error with a
// message — never a crash or an exception — and every decision the decide
// functions take folds cleanly into a state that keeps every invariant.
//
// Input: one byte choosing the request type, then its serialized message.
#include <cstddef>
#include <cstdint>
#include <string>

#include "quiet_protobuf.hpp"
#include "core/lease_decide.hpp"
#include "core/revision_decide.hpp"
#include "core/validate.hpp"
#include "api/server/convert.hpp"
#include "events/revision_fold.hpp"

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

/// Parses the request, converts it (an error must say what is wrong) and
/// hands a command to `decide`.
template <class Request, class Decide>
void convert(const uint8_t* data, size_t size, Decide&& decide) {
  Request req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return;
  auto cmd = api::from_proto(req);
  if (!cmd.ok()) {
    if (cmd.error().message().empty()) __builtin_trap();
    return;
  }
  // The boundary the registry applies before any decision (validate.hpp).
  if (auto st = actors::check_command(*cmd); !st.ok()) {
    if (st.message().empty()) __builtin_trap();
    return;
  }
  decide(*cmd);
}

constexpr auto convert_only = [](auto&) {};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static fixture f;
  auto ctx = f.context();
  uint8_t which = data[0] % 17;
  ++data;
  --size;
  // A command against no revision and the importing one, through `decide_fn`.
  auto against_both = [&](auto decide_fn) {
    return [decide_fn](auto& cmd) { f.decide(cmd, decide_fn); };
  };
  // A lease command against the importing revision.
  auto against_importing = [&](auto decide_fn) {
    return [decide_fn](auto& cmd) { f.check(decide_fn(*f.index.find(f.importing), cmd)); };
  };
  using namespace actors;
  switch (which) {
    case 0: convert<v1::BeginImportRequest>(data, size, against_both([&](auto* r, auto& c) { return decide_begin(r, c, ctx); })); break;
    case 1: convert<v1::CommitImportRequest>(data, size, against_both([&](auto* r, auto& c) { return precheck_commit(r, c); })); break;
    case 2: convert<v1::AbortImportRequest>(data, size, against_both([&](auto* r, auto& c) { return decide_abort(r, c, ctx); })); break;
    case 3: convert<v1::UpdatePolicyRequest>(data, size, against_both([&](auto* r, auto& c) { return decide_update_policy(r, f.index, c, ctx); })); break;
    case 4: convert<v1::RemoveRevisionRequest>(data, size, against_both([&](auto* r, auto& c) { return decide_remove(r, f.index, c, ctx); })); break;
    case 5: convert<v1::MigrateRequest>(data, size, against_both([&](auto* r, auto& c) { return decide_migrate(r, f.index, c, ctx); })); break;
    case 6: convert<v1::AcquireLeaseRequest>(data, size, against_both([&](auto* r, auto& c) { return decide_acquire(r, c, ctx); })); break;
    case 7: convert<v1::RenewLeaseRequest>(data, size, against_importing([&](auto& r, auto& c) { return decide_renew(r, c, ctx); })); break;
    case 8: convert<v1::RevokeLeaseRequest>(data, size, against_importing([&](auto& r, auto& c) { return decide_revoke(r, c, ctx); })); break;
    case 9: convert<v1::GetRevisionRequest>(data, size, convert_only); break;
    case 10: convert<v1::ListRevisionsRequest>(data, size, convert_only); break;
    case 11: convert<v1::ReleaseLeaseRequest>(data, size, convert_only); break;
    case 12: convert<v1::ListLeasesRequest>(data, size, convert_only); break;
    case 13: convert<v1::GetOperationRequest>(data, size, convert_only); break;
    case 14: convert<v1::CancelOperationRequest>(data, size, convert_only); break;
    case 15: convert<v1::ReconcileRequest>(data, size, convert_only); break;
    case 16: convert<v1::PutHeader>(data, size, convert_only); break;
  }
  return 0;
}
