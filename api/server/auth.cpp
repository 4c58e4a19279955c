#include "api/server/auth.hpp"

#include <openssl/crypto.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <sstream>

namespace weightd::api {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

constexpr size_t kMinTokenChars = 16;
constexpr size_t kMaxPartBytes = 1024;

std::string trimmed(const std::string& s) {
  auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

/// The SPEC §9 role table: what each request needs. A request that is not
/// listed needs admin (a new RPC is closed until it is given a row here).
const std::map<std::string, role>& role_table() {
  static const std::map<std::string, role> table = {
      // reader
      {"GetRevisionRequest", role::reader}, {"ListRevisionsRequest", role::reader},
      {"AcquireLeaseRequest", role::reader}, {"RenewLeaseRequest", role::reader},
      {"ReleaseLeaseRequest", role::reader}, {"ListLeasesRequest", role::reader},
      {"OpenLocalRequest", role::reader}, {"GetOperationRequest", role::reader},
      {"GetLineageRequest", role::reader}, {"GetRequest", role::reader},
      {"StatRequest", role::reader}, {"ListObjectsRequest", role::reader},
      {"HistoryRequest", role::reader}, {"WatchRequest", role::reader},
      {"StatusRequest", role::reader},
      // writer
      {"BeginImportRequest", role::writer}, {"CommitImportRequest", role::writer},
      {"AbortImportRequest", role::writer}, {"UpdatePolicyRequest", role::writer},
      {"MigrateRequest", role::writer}, {"CancelOperationRequest", role::writer},
      {"RemoveRevisionRequest", role::writer}, {"BeginUpsertRequest", role::writer},
      {"CommitUpsertRequest", role::writer}, {"AbortUpsertRequest", role::writer},
      {"PutHeader", role::writer}, {"RemoveRequest", role::writer},
      {"BatchRemoveRequest", role::writer},
      // admin: RevokeLease, Evict, RemoveAll, Snapshot, Reconcile (and anything unlisted)
      {"RevokeLeaseRequest", role::admin}, {"EvictRequest", role::admin},
      {"RemoveAllRequest", role::admin}, {"SnapshotRequest", role::admin},
      {"ReconcileRequest", role::admin},
  };
  return table;
}

/// Every `tenant` string field of `m`, at any depth: empty -> `tenant`;
/// another one -> the tenant it names (the first), for the refusal.
std::string impose_tenant(Message& m, const std::string& tenant, bool any) {
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->name() == "tenant" && f->type() == FieldDescriptor::TYPE_STRING && !f->is_repeated()) {
      auto value = r->GetString(m, f);
      if (value.empty() && !tenant.empty()) r->SetString(&m, f, tenant);
      else if (!any && value != tenant) return value;
    } else if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int j = 0; j < r->FieldSize(m, f); ++j)
          if (auto other = impose_tenant(*r->MutableRepeatedMessage(&m, f, j), tenant, any);
              !other.empty())
            return other;
      } else if (r->HasField(m, f)) {
        if (auto other = impose_tenant(*r->MutableMessage(&m, f), tenant, any); !other.empty())
          return other;
      }
    }
  }
  return "";
}

/// "BeginImport" for a BeginImportRequest: what the messages call the RPC.
std::string rpc_of(const Message& request) {
  auto name = request.GetDescriptor()->name();
  auto suffix = name.rfind("Request");
  return suffix != std::string::npos && suffix + 7 == name.size() ? name.substr(0, suffix) : name;
}

/// The bearer token of the call ("" = none).
std::string bearer_token(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return "";
  std::string value(it->second.data(), it->second.size());
  static const std::string prefix = "Bearer ";
  if (value.rfind(prefix, 0) != 0) return "";
  return trimmed(value.substr(prefix.size()));
}

}  // namespace

std::string role_name(role r) {
  switch (r) {
    case role::reader: return "reader";
    case role::writer: return "writer";
    case role::admin: return "admin";
  }
  return "?";
}

role role_needed(const Message& request) {
  auto it = role_table().find(request.GetDescriptor()->name());
  return it == role_table().end() ? role::admin : it->second;
}

result<std::vector<token_entry>> parse_tokens(const std::string& text) {
  std::vector<token_entry> out;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    auto bad = [&](const std::string& why) {
      return status{errc::invalid_argument, "line " + std::to_string(number) + ": " + why};
    };
    line = trimmed(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> parts;
    std::istringstream fields(line);
    for (std::string part; std::getline(fields, part, ',');) parts.push_back(trimmed(part));
    if (parts.size() != 4) return bad("expected token,name,tenant,role");
    token_entry e{parts[0], parts[1], parts[2], role::reader};
    if (e.token.size() < kMinTokenChars)
      return bad("the token is shorter than " + std::to_string(kMinTokenChars) + " characters");
    for (const auto& [field, value] : {std::pair{"name", &e.name}, std::pair{"tenant", &e.tenant}})
      if (value->empty() || value->size() > kMaxPartBytes)
        return bad(std::string{field} + " must be 1..1024 bytes");
    if (parts[3] == "reader") e.role = role::reader;
    else if (parts[3] == "writer") e.role = role::writer;
    else if (parts[3] == "admin") e.role = role::admin;
    else return bad("role '" + parts[3] + "' is not reader, writer or admin");
    for (const auto& other : out)
      if (other.token == e.token) return bad("this token is listed twice");
    out.push_back(std::move(e));
  }
  return out;
}

result<std::vector<token_entry>> load_tokens_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return status{errc::invalid_argument, "--auth-tokens-file " + path + " cannot be read"};
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return status{errc::invalid_argument,
                  "--auth-tokens-file " + path +
                      " is readable by its group or others; make it private: chmod 600 " + path};
  std::ifstream in(path);
  if (!in) return status{errc::invalid_argument, "--auth-tokens-file " + path + " cannot be read"};
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = parse_tokens(text.str());
  if (!parsed)
    return status{errc::invalid_argument, "--auth-tokens-file " + path + ", " + parsed.error().message()};
  return parsed;
}

result<std::shared_ptr<authenticator>> authenticator::open(std::string tokens_file) {
  std::shared_ptr<authenticator> a{new authenticator(std::move(tokens_file))};
  if (a->secured())
    if (auto st = a->reload(); !st.ok()) return st;
  return a;
}

status authenticator::reload() {
  auto loaded = load_tokens_file(file_);
  if (!loaded) return loaded.error();
  auto tokens = std::make_shared<const std::vector<token_entry>>(std::move(*loaded));
  std::lock_guard lock(mutex_);
  tokens_ = std::move(tokens);
  return {};
}

result<caller> authenticator::authorize(const grpc::ServerContextBase& ctx, Message& request) const {
  caller who;
  auto needed = role_needed(request);
  if (!secured()) {
    who.principal = ctx.peer();
    return who;
  }
  std::shared_ptr<const std::vector<token_entry>> tokens;
  {
    std::lock_guard lock(mutex_);
    tokens = tokens_;
  }
  auto presented = bearer_token(ctx);
  const token_entry* found = nullptr;
  if (!presented.empty())
    for (const auto& e : *tokens)  // every entry compared, each in constant time
      if (e.token.size() == presented.size() &&
          CRYPTO_memcmp(e.token.data(), presented.data(), presented.size()) == 0)
        found = &e;
  if (!found)
    return status{errc::unauthenticated,
                  presented.empty() ? "no credential: send 'authorization: Bearer <token>' "
                                      "(weightctl --token-file or WEIGHTD_TOKEN)"
                                    : "the token is not known to this daemon; ask its operator "
                                      "for one"};
  who.secured = true;
  who.principal = found->name;
  who.tenant = found->tenant;
  who.role = found->role;
  if (who.role < needed)
    return status{errc::permission_denied, rpc_of(request) + " needs the " + role_name(needed) +
                                               " role; '" + who.principal + "' is a " +
                                               role_name(who.role)};
  if (auto other = impose_tenant(request, who.tenant, who.role == role::admin); !other.empty())
    return status{errc::permission_denied, "tenant '" + other + "' is not the tenant of '" +
                                               who.principal + "' (" + who.tenant +
                                               "); leave the tenant empty or name your own"};
  return who;
}

}  // namespace weightd::api
