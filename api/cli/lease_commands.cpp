#include "api/cli/lease_commands.hpp"
#include "events/time_text.hpp"

#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <csignal>

#include "api/cli/format.hpp"
#include "api/common/json_output.hpp"
#include "api/cli/online_support.hpp"

namespace weightd::api {

namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) { g_interrupted.store(true); }

void print_lease(const online_options& o, const v1::Lease& l, std::ostream& out) {
  if (o.json) {
    out << to_json(l) << "\n";
    return;
  }
  out << fmt::format("lease {} on {} held by {} until {}\n", l.lease_id(),
                     events::canonical_text(events::revision_key::from_proto(l.id())), l.holder(),
                     format_time(l.expiry_ms()));
}

}  // namespace

void install_interrupt_flag() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() { return g_interrupted.load(); }

std::string default_holder(const std::string& command) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return fmt::format("weightctl-{}@{}:{}", command, host, getpid());
}

// ---------------------------------------------------------------- held_lease

result<std::unique_ptr<held_lease>> held_lease::acquire(const client_options& connection,
                                                        const events::revision_key& id,
                                                        const std::string& holder,
                                                        std::chrono::milliseconds ttl) {
  client c{connection};
  v1::AcquireLeaseRequest req;
  *req.mutable_id() = id.to_proto();
  req.set_holder(holder);
  req.set_ttl_ms(static_cast<uint64_t>(ttl.count()));
  auto lease = c.acquire_lease(req);
  if (!lease) return lease.error();
  return std::unique_ptr<held_lease>(new held_lease(connection, *lease, ttl));
}

held_lease::held_lease(const client_options& connection, v1::Lease lease,
                       std::chrono::milliseconds ttl)
    : client_(connection), lease_(std::move(lease)), ttl_(ttl) {
  renewer_ = std::thread([this] { renew_loop(); });
}

void held_lease::renew_loop() {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, ttl_ / 3, [this] { return stopping_; })) {
    lock.unlock();
    v1::RenewLeaseRequest req;
    req.set_lease_id(lease_.lease_id());
    req.set_ttl_ms(static_cast<uint64_t>(ttl_.count()));
    auto renewed = client_.renew_lease(req);
    lock.lock();
    if (!renewed) renewal_error_ = renewed.error();
  }
}

status held_lease::renewal_error() const {
  std::lock_guard lock(mu_);
  return renewal_error_;
}

held_lease::~held_lease() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  renewer_.join();
  v1::ReleaseLeaseRequest req;
  req.set_lease_id(lease_.lease_id());
  (void)client_.release_lease(req);  // best effort: an unreleased lease expires by itself
}

// ------------------------------------------------------------------ commands

int lease_acquire(const online_options& o, const std::string& text, std::string holder,
                  uint64_t ttl_ms, std::ostream& out, std::ostream& err) {
  client c{o.connection};
  auto id = resolve(c, text, true);
  if (!id) return fail(err, id.error());
  if (!id->generation) return fail(err, {errc::not_found, "no READY revision " + text});
  v1::AcquireLeaseRequest req;
  *req.mutable_id() = id->to_proto();
  req.set_holder(holder.empty() ? default_holder("lease") : holder);
  req.set_ttl_ms(ttl_ms);
  auto lease = c.acquire_lease(req);
  if (!lease) return fail(err, lease.error());
  print_lease(o, *lease, out);
  return 0;
}

int lease_renew(const online_options& o, uint64_t lease_id, uint64_t ttl_ms, std::ostream& out,
                std::ostream& err) {
  client c{o.connection};
  v1::RenewLeaseRequest req;
  req.set_lease_id(lease_id);
  req.set_ttl_ms(ttl_ms);
  auto lease = c.renew_lease(req);
  if (!lease) return fail(err, lease.error());
  print_lease(o, *lease, out);
  return 0;
}

int lease_release(const online_options& o, uint64_t lease_id, std::ostream& out,
                  std::ostream& err) {
  client c{o.connection};
  v1::ReleaseLeaseRequest req;
  req.set_lease_id(lease_id);
  auto released = c.release_lease(req);
  if (!released) return fail(err, released.error());
  if (o.json) out << json_line({{"lease_id", lease_id}, {"released", true}}) << "\n";
  else out << fmt::format("lease {} released\n", lease_id);
  return 0;
}

int lease_list(const online_options& o, const std::string& text, std::ostream& out,
               std::ostream& err) {
  client c{o.connection};
  auto id = resolve(c, text, true);
  if (!id) return fail(err, id.error());
  if (!id->generation) return fail(err, {errc::not_found, "no READY revision " + text});
  v1::ListLeasesRequest req;
  *req.mutable_id() = id->to_proto();
  auto list = c.list_leases(req);
  if (!list) return fail(err, list.error());
  if (o.json) {
    out << json_line(list_of(list->leases())) << "\n";
    return 0;
  }
  if (list->leases().empty()) {
    out << "no live lease on " << events::canonical_text(*id) << "\n";
    return 0;
  }
  std::vector<std::string> holders;
  for (const auto& l : list->leases()) holders.push_back(l.holder());
  auto width = column_width(40, holders);
  out << fmt::format("{:<8}  {:<{}}  {}\n", "LEASE", "HOLDER", width, "EXPIRES");
  for (const auto& l : list->leases())
    out << fmt::format("{:<8}  {:<{}}  {}\n", l.lease_id(), l.holder(), width,
                       format_time(l.expiry_ms()));
  return 0;
}

int lease_revoke(const online_options& o, uint64_t lease_id, const std::string& reason,
                 std::ostream& out, std::ostream& err) {
  client c{o.connection};
  v1::RevokeLeaseRequest req;
  req.set_lease_id(lease_id);
  req.set_reason(reason);
  auto lease = c.revoke_lease(req);
  if (!lease) return fail(err, lease.error());
  if (o.json) out << to_json(*lease) << "\n";
  else out << fmt::format("lease {} of {} revoked\n", lease_id, lease->holder());
  return 0;
}

}  // namespace weightd::api
