// Security end to end (SPEC §9): the real daemon with a tokens file, the real
// weightctl with tokens: two tenants side by side see only their own
// revisions, objects, leases, operations and events; TLS and mutual TLS with
// certificates the test makes with openssl; a tokens file re-read on SIGHUP;
// a public --listen without tokens and TLS refused.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>

#include <thread>

#include "daemon_fixture.hpp"

using namespace weightd;
using namespace weightd::test;

namespace {

const char* kTokens =
    "acme-writer-0123456789,bob,acme,writer\n"
    "globex-writer-012345678,eve,globex,writer\n"
    "acme-reader-0123456789,alice,acme,reader\n";

void write_private(const std::filesystem::path& path, const std::string& text) {
  write_file(path, text);
  ::chmod(path.c_str(), 0600);
}

/// weightctl flags that send `token`.
std::string with_token(const std::string& token) { return "--token " + token; }

/// weightctl against `d` with `token` (instead of the daemon's ctl_flags).
run_result as(const running_daemon& d, const std::string& token, const std::string& args) {
  return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + d.address + " " +
                     with_token(token) + " " + args);
}

/// A CA, a server certificate for 127.0.0.1 and localhost, and a client
/// certificate, all made with openssl in `dir` (nothing is committed).
void make_certificates(const std::filesystem::path& dir) {
  auto in = [&](const std::string& cmd) {
    auto r = run_command("cd " + dir.string() + " && " + cmd + " 2>&1");
    REQUIRE_MESSAGE(r.exit_code == 0, cmd << ": " << r.output);
  };
  in("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 "
     "-subj '/CN=weightd test CA'");
  in("openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj '/CN=localhost'");
  write_file(dir / "san.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
  in("openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem "
     "-days 1 -extfile san.ext");
  in("openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj '/CN=trainer'");
  in("openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem "
     "-days 1");
}

}  // namespace

TEST_CASE("cli security: two tenants side by side see only their own revisions, objects, leases "
          "and events, the journal names who did what") {
  temp_dir dir;
  write_private(dir.path() / "tokens.csv", kTokens);
  write_file(dir.path() / "model" / "w.bin", pattern(5000, 1));
  daemon_options o;
  o.flags = {"--auth-tokens-file", (dir.path() / "tokens.csv").string()};
  o.ctl_flags = with_token("acme-writer-0123456789");
  running_daemon d{dir.path() / "var", o};
  auto model = (dir.path() / "model").string();
  auto as = [&](const std::string& token, const std::string& args) {
    return ::as(d, token, args);
  };
  REQUIRE(as("acme-writer-0123456789", "import " + model + " --as acme:default/m@main -q").exit_code == 0);
  REQUIRE(as("globex-writer-012345678", "import " + model + " --as globex:default/m@main -q").exit_code == 0);

  auto acme_ls = as("acme-writer-0123456789", "ls");
  CHECK(acme_ls.output.find("acme:default/m@main#1") != std::string::npos);
  CHECK(acme_ls.output.find("globex") == std::string::npos);
  CHECK(as("globex-writer-012345678", "ls").output.find("acme") == std::string::npos);
  auto foreign = as("acme-writer-0123456789", "ls --tenant globex");
  CHECK(foreign.exit_code == 17);  // PERMISSION_DENIED
  CHECK(as("acme-writer-0123456789", "show globex:default/m@main#1").exit_code == 17);
  CHECK(as("acme-writer-0123456789", "export globex:default/m@main " +
                                         (dir.path() / "out").string() + " -q")
            .exit_code == 17);
  auto objects = as("acme-writer-0123456789", "obj ls");
  CHECK(objects.output.find("weights/default/m/main/1/files/w.bin") != std::string::npos);
  // A lease of globex is not acme's to renew or release: as if unknown.
  auto lease = as("globex-writer-012345678", "lease acquire globex:default/m@main --holder g");
  REQUIRE(lease.exit_code == 0);
  CHECK(as("acme-writer-0123456789", "lease renew 1 --ttl 60s").exit_code == 3);  // NOT_FOUND
  CHECK(as("acme-writer-0123456789", "lease ls globex:default/m@main").exit_code == 17);
  // An operation of acme is unknown to globex, by id or in a listing.
  auto migrated = as("acme-writer-0123456789", "migrate acme:default/m@main --to COLD --wait");
  REQUIRE_MESSAGE(migrated.exit_code == 0, migrated.output);
  CHECK(as("acme-writer-0123456789", "op show 1").exit_code == 0);
  CHECK(as("globex-writer-012345678", "op show 1").exit_code == 3);    // NOT_FOUND
  CHECK(as("globex-writer-012345678", "op cancel 1").exit_code == 3);  // NOT_FOUND
  // A reader reads, does not write.
  CHECK(as("acme-reader-0123456789", "ls").exit_code == 0);
  auto denied = as("acme-reader-0123456789", "rm acme:default/m@main");
  CHECK(denied.exit_code == 17);
  CHECK(denied.output.find("needs the writer role") != std::string::npos);
  // Watch: each tenant's own events only; the principal is the token's name.
  auto watched = as("acme-writer-0123456789", "watch --from 1 --count 3 --json");
  REQUIRE_MESSAGE(watched.exit_code == 0, watched.output);
  CHECK(watched.output.find("globex") == std::string::npos);
  CHECK(watched.output.find("\"principal\": \"bob\"") != std::string::npos);
  auto history = as("acme-writer-0123456789", "history acme:default/m@main#1");
  CHECK(history.output.find(" bob ") != std::string::npos);
  // Without a token: UNAUTHENTICATED (exit 16).
  CHECK(run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + d.address + " status")
            .exit_code == 16);
}

TEST_CASE("cli security: TLS and mutual TLS with weightctl, plaintext and a missing client "
          "certificate are refused") {
  temp_dir dir;
  make_certificates(dir.path());
  write_private(dir.path() / "tokens.csv", kTokens);
  auto file = [&](const char* name) { return (dir.path() / name).string(); };
  daemon_options o;
  o.flags = {"--auth-tokens-file", file("tokens.csv"), "--tls-cert-file", file("server.pem"),
             "--tls-key-file", file("server.key"), "--tls-client-ca-file", file("ca.pem")};
  o.ctl_flags = with_token("acme-writer-0123456789") + " --tls-ca-file " + file("ca.pem") +
                " --tls-cert-file " + file("client.pem") + " --tls-key-file " + file("client.key");
  running_daemon d{dir.path() / "var", o};
  auto status = d.ctl("status");
  REQUIRE_MESSAGE(status.exit_code == 0, status.output);
  write_file(dir.path() / "model" / "w.bin", pattern(5000, 2));
  CHECK(d.ctl("import " + (dir.path() / "model").string() + " --as acme:default/m@main -q")
            .exit_code == 0);
  auto bare = [&](const std::string& flags) {
    return run_command(std::string{WEIGHTD_WEIGHTCTL} + " --address " + d.address + " " + flags +
                       " status 2>&1");
  };
  CHECK(bare(with_token("acme-writer-0123456789")).exit_code == 69);  // plaintext: no handshake
  CHECK(bare(with_token("acme-writer-0123456789") + " --tls-ca-file " + file("ca.pem")).exit_code ==
        69);  // no client certificate
}

TEST_CASE("cli security: SIGHUP re-reads the tokens file, a malformed one keeps the tokens in "
          "force and the log says why") {
  temp_dir dir;
  auto tokens = dir.path() / "tokens.csv";
  write_private(tokens, "first-token-0123456789,a,default,reader\n");
  daemon_options o;
  o.flags = {"--auth-tokens-file", tokens.string()};
  o.ctl_flags = with_token("first-token-0123456789");
  o.log_file = dir.path() / "weightd.log";
  o.log_level = "info";
  running_daemon d{dir.path() / "var", o};
  write_private(tokens, "first-token-0123456789,a,default,reader\n"
                        "second-token-012345678,b,default,admin\n");
  ::kill(d.pid, SIGHUP);
  bool took = false;
  for (int i = 0; i < 200 && !took; ++i) {
    took = as(d, "second-token-012345678", "reconcile --dry-run").exit_code == 0;
    if (!took) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  CHECK(took);
  write_private(tokens, "not a tokens line\n");
  ::kill(d.pid, SIGHUP);
  bool logged = false;
  for (int i = 0; i < 200 && !logged; ++i) {
    logged = read_file(dir.path() / "weightd.log").find("tokens file not re-read") != std::string::npos;
    if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  CHECK(logged);
  CHECK(d.ctl("status").exit_code == 0);  // the tokens in force stayed
  CHECK(read_file(dir.path() / "weightd.log").find("first-token-0123456789") == std::string::npos);
}

TEST_CASE("cli security: a public --listen without a tokens file and TLS does not start and names "
          "what is missing") {
  temp_dir dir;
  auto r = run_command(std::string{WEIGHTD_DAEMON} + " --data-dir " + (dir.path() / "var").string() +
                       " --hot-dir " + (dir.path() / "hot").string() +
                       " --listen 0.0.0.0:0 --http-listen 127.0.0.1:0 2>&1");
  CHECK(r.exit_code == 64);  // a configuration error, like every other (README)
  CHECK(r.output.find("--auth-tokens-file and --tls-cert-file/--tls-key-file") != std::string::npos);
}

TEST_CASE("cli security: a group-readable tokens file is a configuration error: exit 64 naming it") {
  temp_dir dir;
  write_file(dir.path() / "tokens.csv", "some-token-0123456789,bob,acme,writer\n");
  ::chmod((dir.path() / "tokens.csv").c_str(), 0640);
  auto r = run_command(std::string{WEIGHTD_DAEMON} + " --data-dir " + (dir.path() / "var").string() +
                       " --hot-dir " + (dir.path() / "hot").string() +
                       " --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --auth-tokens-file " +
                       (dir.path() / "tokens.csv").string() + " 2>&1");
  CHECK(r.exit_code == 64);
  CHECK(r.output.find("--auth-tokens-file") != std::string::npos);
}
