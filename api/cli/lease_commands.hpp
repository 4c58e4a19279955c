// weightctl's lease commands, and the lease that `export` holds while it
// reads (SPEC §4 Leases).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <thread>

#include "api/cli/online_commands.hpp"
#include "events/identity.hpp"

namespace weightd::api {

/// A revision lease held for the lifetime of this object: acquired by
/// acquire(), renewed from a background thread every ttl/3, released by the
/// destructor — on success, on error and when the command is interrupted.
class held_lease {
 public:
  static result<std::unique_ptr<held_lease>> acquire(const client_options& connection,
                                                     const events::revision_key& id,
                                                     const std::string& holder,
                                                     std::chrono::milliseconds ttl);
  ~held_lease();
  held_lease(const held_lease&) = delete;
  held_lease& operator=(const held_lease&) = delete;

  const v1::Lease& lease() const { return lease_; }
  /// The last renewal's failure (e.g. LEASE_EXPIRED after a long stall), if any.
  status renewal_error() const;

 private:
  held_lease(const client_options& connection, v1::Lease lease, std::chrono::milliseconds ttl);
  void renew_loop();

  client client_;
  v1::Lease lease_;
  std::chrono::milliseconds ttl_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  status renewal_error_;
  std::thread renewer_;
};

/// "weightctl-<command>@<host>:<pid>": who holds a lease weightctl took.
std::string default_holder(const std::string& command);

/// True once SIGINT/SIGTERM arrived after install_interrupt_flag(): long
/// transfers stop at the next chunk so their cleanup (lease release) runs.
void install_interrupt_flag();
bool interrupted();

int lease_acquire(const online_options& o, const std::string& id, std::string holder,
                  uint64_t ttl_ms, std::ostream& out, std::ostream& err);
int lease_renew(const online_options& o, uint64_t lease_id, uint64_t ttl_ms, std::ostream& out,
                std::ostream& err);
int lease_release(const online_options& o, uint64_t lease_id, std::ostream& out,
                  std::ostream& err);
int lease_list(const online_options& o, const std::string& id, std::ostream& out,
               std::ostream& err);
int lease_revoke(const online_options& o, uint64_t lease_id, const std::string& reason,
                 std::ostream& out, std::ostream& err);

}  // namespace weightd::api
