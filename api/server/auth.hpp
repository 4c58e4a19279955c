// Authentication and authorization (SPEC §9), in one place: who a call is
// (the bearer token's entry in the tokens file), whether its role may make
// the call (one table, keyed by the request message), and the tenant it may
// touch (taken from the credential and written into every `tenant` field of
// the request, so no handler sees a tenant the caller did not get).
//
// Tokens file (--auth-tokens-file), the Kubernetes static-token convention:
//   # comment
//   token,name,tenant,role
// one line per token; a token is at least 16 characters, a name and a tenant
// 1..1024 bytes, the role reader, writer or admin. The daemon refuses a file
// that is group- or world-readable, and re-reads it on SIGHUP (reload()): a
// file that does not parse keeps the tokens already loaded. Tokens are
// compared in constant time and never logged.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "events/status.hpp"

namespace weightd::api {

enum class role { reader = 0, writer = 1, admin = 2 };
std::string role_name(role r);

struct token_entry {
  std::string token, name, tenant;
  api::role role = role::reader;
};

/// The tokens of a file, parsed and checked (errors name the line).
result<std::vector<token_entry>> parse_tokens(const std::string& text);
/// Reads and parses the tokens file; refuses one group- or world-readable.
result<std::vector<token_entry>> load_tokens_file(const std::string& path);

/// Who is calling, as the handlers see it.
struct caller {
  bool secured = false;   // a tokens file is in force
  std::string principal;  // the token's name; with security off, the peer address
  std::string tenant;     // the credential's ("" with security off: the request's counts)
  api::role role = role::admin;
  bool any_tenant() const { return !secured || role == role::admin; }
};

/// The role a request needs (SPEC §9 table), by its message type.
role role_needed(const google::protobuf::Message& request);

class authenticator {
 public:
  /// `tokens_file` "" = security off (loopback only, checked by the server).
  static result<std::shared_ptr<authenticator>> open(std::string tokens_file);

  /// Re-reads the tokens file; on failure the tokens in force stay.
  status reload();

  /// The caller of `ctx` may make `request`: UNAUTHENTICATED without a known
  /// bearer token, PERMISSION_DENIED naming the role needed; then every
  /// `tenant` field of `request` (at any depth) is the caller's — empty ones
  /// filled in, another tenant PERMISSION_DENIED unless the caller is admin.
  result<caller> authorize(const grpc::ServerContextBase& ctx,
                           google::protobuf::Message& request) const;

  bool secured() const { return !file_.empty(); }

 private:
  explicit authenticator(std::string file) : file_(std::move(file)) {}
  std::string file_;
  mutable std::mutex mutex_;  // guards tokens_ (reload swaps it)
  std::shared_ptr<const std::vector<token_entry>> tokens_;
};

}  // namespace weightd::api
