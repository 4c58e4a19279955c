// What a standby answers (SPEC §11) while it follows its leader
// (follower.hpp): AdminService.Status from where it is (role, epoch, its
// leader, how far behind), AdminService.Promote, GetRevision,
// ListRevisions, GetOperation, GetLineage, History and Watch from its own
// fold and journal (standby_weight_service.cpp), and for every other RPC
// UNAVAILABLE with `weightd-error: NOT_LEADER` and the trailer
// `weightd-leader: <address>`, so that a client can go there.
//
// Promote asks; the daemon's main thread promotes (standby_main in
// weightd_main.cpp): it stops this server and the follower, writes
// leadership_taken with the next epoch and starts as the leader on the
// same journal. Without `force` a standby whose leader still streams to it
// refuses: promoting then would make two leaders.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>

#include "actors/actors.hpp"
#include "api/server/call_bridge.hpp"
#include "api/server/follower.hpp"
#include "api/server/replica_mirror.hpp"
#include "api/server/server.hpp"
#include "api/server/stream_limits.hpp"

namespace weightd::api {

/// What a standby's WeightService reads (standby_weight_service.cpp): the
/// fold, and for History and Watch a journal reader over its journal,
/// spawned at its first use — after the leader confirmed the journal (a
/// former leader's diverged tail is set aside before), so the reader never
/// saw a head that was taken back.
struct standby_reads {
  const follower& standby;
  call_bridge& bridge;
  std::function<actors::journal_reader_actor()> reader;
  stream_limits& limits;
  std::shared_ptr<authenticator> auth;
};

std::unique_ptr<grpc::Service> make_standby_weight_service(const standby_reads& reads,
                                                           const std::string& leader);

class standby_server {
 public:
  /// Serves `standby` on options.listen, its History and Watch from
  /// `journal` through actors of `sys`, its Status with `mirror`'s
  /// progress; `promote` runs (on a gRPC thread, quickly: it only asks) once
  /// a Promote is accepted. The actors it spawned are gone once it is
  /// destroyed.
  static result<std::unique_ptr<standby_server>> start(
      caf::actor_system& sys, const follower& standby, const replica_mirror& mirror,
      std::shared_ptr<const persistence::journal_backend> journal, std::string leader,
      server_options options, std::function<void()> promote);
  ~standby_server();
  int port() const { return port_; }
  /// Stops accepting calls and lets those in flight (a Promote's answer) end.
  void shutdown(std::chrono::milliseconds drain);

 private:
  standby_server() = default;
  struct services;
  std::unique_ptr<services> services_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace weightd::api
