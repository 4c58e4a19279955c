// weightd in a host master's process, without CAF in the host's code: this
// class starts the actor system and the node, and offers the operations as
// asynchronous calls returning std::future. Hosts that speak CAF use the
// typed handles of node() directly.
//
//   auto store = weightd::actors::embedded::start(config);
//   auto begun = (*store)->begin_import(cmd);        // std::future<result<...>>
//   if (auto view = begun.get(); view.ok()) ...
#pragma once

#include <future>
#include <memory>

#include "actors/errors.hpp"
#include "actors/node.hpp"

namespace weightd::actors {

class embedded {
 public:
  /// `threads` = CAF workers (0 = number of cores); `backend` overrides
  /// the LMDB journal of config.journal (as node::start's).
  static result<std::unique_ptr<embedded>> start(
      node_config config, unsigned threads = 0,
      std::shared_ptr<persistence::journal_backend> backend = nullptr);
  ~embedded();
  embedded(const embedded&) = delete;
  embedded& operator=(const embedded&) = delete;

  std::future<result<revision_view>> begin_import(begin_import cmd);
  std::future<result<revision_view>> commit_import(commit_import cmd);
  std::future<result<removal_result>> abort_import(abort_import cmd);
  std::future<result<revision_view>> update_policy(update_policy cmd);
  std::future<result<removal_result>> remove_revision(remove_revision cmd);
  std::future<result<revision_view>> get_revision(get_revision cmd);
  std::future<result<revision_page>> list_revisions(list_revisions cmd);
  std::future<result<object_info>> stat_object(std::string tenant, std::string key);
  std::future<result<lease_view>> acquire_lease(acquire_lease cmd);
  std::future<result<lease_view>> renew_lease(renew_lease cmd);
  std::future<result<lease_view>> release_lease(release_lease cmd);
  std::future<result<lease_view>> revoke_lease(revoke_lease cmd);
  std::future<result<lease_list>> list_leases(list_leases cmd);

  /// Puts `bytes` as one object: reserve, write on the calling thread,
  /// register. Blocks the caller (never an actor) until the object is visible.
  result<object_info> put_object(put_request request, std::string_view bytes);

  node& handles() { return *node_; }
  caf::actor_system& system() { return *system_; }

  std::chrono::seconds timeout{60};

 private:
  embedded() = default;
  /// Sends a request from a short-lived actor; the future gets the reply.
  template <class Reply, class Handle, class... Ts>
  std::future<result<Reply>> call(Handle handle, Ts... xs);

  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  std::unique_ptr<node> node_;
};

}  // namespace weightd::actors
