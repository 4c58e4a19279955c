// store_bench: what the object store costs over the raw file system.
// Put = put_start + streaming write (xxh3 as bytes arrive) + put_end (fsync on
// COLD, rename, journal commit); baseline = write + fsync of the same bytes.
// Get = read grant + reading the file; baseline = reading a file of the same
// size. Both reads start cold (posix_fadvise DONTNEED). Prints figures and
// ratios (target >= 0.7x); asserts nothing.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "actors/errors.hpp"
#include "actors/node.hpp"

using namespace weightd;
using clock_type = std::chrono::steady_clock;
namespace v1 = events::v1;

namespace {

constexpr size_t kChunk = 4u << 20;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

void fail(const std::string& what) {
  std::fprintf(stderr, "store_bench: %s\n", what.c_str());
  std::exit(1);
}

void drop_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

uint64_t read_whole(const std::string& path, std::vector<char>& buf) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open " + path);
  uint64_t total = 0;
  for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) total += static_cast<uint64_t>(n);
  ::close(fd);
  return total;
}

void raw_write(const std::string& path, const std::string& data, uint64_t size, bool durable) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail("cannot create " + path);
  for (size_t at = 0; at < size; at += kChunk)
    if (::write(fd, data.data() + at, std::min<size_t>(kChunk, size - at)) < 0) fail("write");
  if (durable) ::fsync(fd);
  ::close(fd);
}

struct figures {
  double put, raw_write, get, raw_read;  // MiB/s
};

figures measure(caf::actor_system& sys, actors::object_store_actor store,
                const std::filesystem::path& raw_dir, v1::Tier tier, uint64_t size, int count,
                const std::string& data) {
  caf::scoped_actor self{sys};
  double mib = static_cast<double>(size) * count / (1 << 20);
  bool durable = tier == v1::TIER_COLD;
  std::string prefix = std::string(tier == v1::TIER_COLD ? "cold" : "hot") + "/" +
                       std::to_string(size) + "/";
  figures f{};

  auto start = clock_type::now();
  for (int i = 0; i < count; ++i) {
    actors::put_request req;
    req.key = prefix + std::to_string(i);
    req.size = size;
    req.tier = tier;
    self->request(store, std::chrono::minutes(5), actors::put_atom::value, req)
        .receive(
            [&](actors::put_ticket& ticket) {
              auto w = persistence::blob_writer::create(ticket.temp_path, ticket.want_sha256);
              if (!w) fail(w.error().to_string());
              for (size_t at = 0; at < size; at += kChunk)
                if (!(*w)->write(data.data() + at, std::min<size_t>(kChunk, size - at)).ok())
                  fail("write");
              auto digest = (*w)->finish();
              self->request(store, std::chrono::minutes(5), actors::put_atom::value,
                            ticket.put_id, *digest)
                  .receive([](actors::object_info&) {},
                           [](caf::error& e) { fail(caf::to_string(e)); });
            },
            [](caf::error& e) { fail(caf::to_string(e)); });
  }
  f.put = mib / seconds_since(start);

  start = clock_type::now();
  for (int i = 0; i < count; ++i)
    raw_write((raw_dir / (std::to_string(size) + "-" + std::to_string(i))).string(),
              data, size, durable);
  f.raw_write = mib / seconds_since(start);

  std::vector<char> buf(kChunk);
  std::vector<std::string> paths;
  for (int i = 0; i < count; ++i) {
    self->request(store, std::chrono::minutes(1), caf::get_atom::value, std::string{"default"},
                  prefix + std::to_string(i))
        .receive([&](actors::read_grant& g) { paths.push_back(g.path); },
                 [](caf::error& e) { fail(caf::to_string(e)); });
    drop_cache(paths.back());
    drop_cache((raw_dir / (std::to_string(size) + "-" + std::to_string(i))).string());
  }
  start = clock_type::now();
  for (int i = 0; i < count; ++i) {
    std::string path;
    self->request(store, std::chrono::minutes(1), caf::get_atom::value, std::string{"default"},
                  prefix + std::to_string(i))
        .receive([&](actors::read_grant& g) { path = g.path; },
                 [](caf::error& e) { fail(caf::to_string(e)); });
    if (read_whole(path, buf) != size) fail("short read");
  }
  f.get = mib / seconds_since(start);

  start = clock_type::now();
  for (int i = 0; i < count; ++i)
    read_whole((raw_dir / (std::to_string(size) + "-" + std::to_string(i))).string(), buf);
  f.raw_read = mib / seconds_since(start);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"store_bench: object store put/get vs raw file I/O"};
  std::string dir = "./bench-data";
  std::string hot_dir = "/dev/shm/weightd-bench-" + std::to_string(getpid());
  uint64_t bytes_per_case = 1ull << 30;
  app.add_option("--dir", dir, "Scratch directory on the disk to measure (removed at the end)")
      ->capture_default_str();
  app.add_option("--hot-dir", hot_dir, "Scratch directory on tmpfs (removed at the end)")
      ->capture_default_str();
  app.add_option("--bytes-per-case", bytes_per_case, "Bytes written per size and tier")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::filesystem::path base{dir};
  std::filesystem::remove_all(base);
  std::filesystem::remove_all(hot_dir);

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<size_t>(std::thread::hardware_concurrency()));
  cfg.set("scheduler.policy", caf::atom("sharing"));
  actors::add_error_category(cfg);
  caf::actor_system sys{cfg};
  actors::node_config c;
  c.journal.dir = base / "journal";
  c.hot = {v1::TIER_HOT, hot_dir, 8ull << 30, false};
  c.cold = {v1::TIER_COLD, base / "cold", 0, true};
  auto node = actors::node::start(sys, c);
  if (!node) fail(node.error().to_string());

  std::string data(256u << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);

  std::printf("store_bench (HOT %s, COLD %s/cold, sync journal)\n\n", hot_dir.c_str(), dir.c_str());
  std::printf("%-5s %8s %6s %10s %10s %6s %10s %10s %6s\n", "tier", "object", "count",
              "put MiB/s", "raw MiB/s", "ratio", "get MiB/s", "raw MiB/s", "ratio");
  for (auto tier : {v1::TIER_HOT, v1::TIER_COLD}) {
    auto raw_dir = tier == v1::TIER_HOT ? std::filesystem::path(hot_dir) / "raw" : base / "raw";
    std::filesystem::create_directories(raw_dir);
    for (uint64_t size : {1ull << 20, 16ull << 20, 256ull << 20}) {
      int count = static_cast<int>(std::max<uint64_t>(2, bytes_per_case / size));
      auto f = measure(sys, (*node)->objects(), raw_dir, tier, size, count, data);
      std::printf("%-5s %6lluMiB %6d %10.0f %10.0f %6.2f %10.0f %10.0f %6.2f\n",
                  tier == v1::TIER_HOT ? "HOT" : "COLD",
                  static_cast<unsigned long long>(size >> 20), count, f.put, f.raw_write,
                  f.put / f.raw_write, f.get, f.raw_read, f.get / f.raw_read);
    }
    std::filesystem::remove_all(raw_dir);
  }
  // What one blocking request costs (a get grant is one): explains small objects.
  {
    caf::scoped_actor self{sys};
    constexpr int rounds = 2000;
    auto start = clock_type::now();
    for (int i = 0; i < rounds; ++i)
      self->request((*node)->objects(), std::chrono::seconds(10), actors::stat_atom::value,
                    std::string{"default"}, std::string{"hot/1048576/0"})
          .receive([](actors::object_info&) {}, [](caf::error& e) { fail(caf::to_string(e)); });
    std::printf("\none request round trip (stat, blocking client): %.0f us\n",
                seconds_since(start) * 1e6 / rounds);
  }
  (*node)->stop();
  node->reset();
  std::filesystem::remove_all(base);
  std::filesystem::remove_all(hot_dir);
  return 0;
}
