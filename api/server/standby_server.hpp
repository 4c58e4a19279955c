// What a standby answers (SPEC §11) while it follows its leader
// (follower.hpp): AdminService.Status from where it is (role, epoch, its
// leader, how far behind), AdminService.Promote, and for every other RPC
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

#include "api/server/follower.hpp"
#include "api/server/server.hpp"

namespace weightd::api {

class standby_server {
 public:
  /// Serves `standby` on options.listen; `promote` runs (on a gRPC thread,
  /// quickly: it only asks) once a Promote is accepted.
  static result<std::unique_ptr<standby_server>> start(const follower& standby,
                                                       std::string leader, server_options options,
                                                       std::function<void()> promote);
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
