// Embedding weightd in a host process: import a small revision, read it back,
// list it. Run it twice: the second run finds the revision the first left
// (the state is rebuilt from the journal), imports the next generation, and
// removes the first.
//
//   ./build/examples/embed_import --data-dir ./var --hot-dir /dev/shm/weightd-example
#include <CLI/CLI.hpp>

#include <cstdio>

#include "actors/embedded.hpp"
#include "events/identity.hpp"

using namespace weightd;
namespace v1 = events::v1;

int main(int argc, char** argv) {
  CLI::App app{"embed_import: a host master importing a model revision into embedded weightd"};
  std::string data_dir = "./var", hot_dir = "/dev/shm/weightd-example";
  app.add_option("--data-dir", data_dir)->capture_default_str();
  app.add_option("--hot-dir", hot_dir)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  actors::node_config config;
  config.journal.dir = data_dir + "/journal";
  config.hot = {v1::TIER_HOT, hot_dir, 1ull << 30, false};
  config.cold = {v1::TIER_COLD, data_dir + "/cold", 0, true};
  auto started = actors::embedded::start(config);
  if (!started) {
    std::fprintf(stderr, "%s\n", started.error().to_string().c_str());
    return 1;
  }
  auto& store = **started;

  // The next generation of default/tiny-llm@main.
  actors::list_revisions all;
  all.resource = "tiny-llm";
  auto existing = store.list_revisions(all).get();
  uint64_t generation = existing.ok() && !existing->revisions.empty()
                            ? existing->revisions.back().record.id.generation + 1
                            : 1;
  events::revision_key id{"default", "default", "tiny-llm", "main", generation};
  auto group = events::payload_group_id(id);
  std::vector<std::pair<std::string, std::string>> files = {
      {"model-00001.safetensors", std::string(3000, 'a')},
      {"model-00002.safetensors", std::string(2000, 'b')}};

  uint64_t bytes = 0;
  for (auto& f : files) bytes += f.second.size();
  auto begun = store.begin_import({id, "", files.size(), bytes, false, {}, 0, "example", "", {}}).get();
  if (!begun) return std::fprintf(stderr, "begin: %s\n", begun.error().to_string().c_str()), 1;

  std::vector<std::string> keys;
  std::string manifest = "{\"files\":[";
  for (auto& [name, content] : files) {
    actors::put_request put;
    put.key = "weights/tiny-llm/main/" + std::to_string(generation) + "/" + name;
    put.group_id = group;
    put.data_type = v1::DATA_TYPE_WEIGHT;
    put.affinity_id = name;
    if (auto r = store.put_object(put, content); !r) {
      std::fprintf(stderr, "put: %s\n", r.error().to_string().c_str());
      auto aborted = store.abort_import({id, 1, keys, "example", ""}).get();
      std::fprintf(stderr, "import aborted: %s\n",
                   aborted ? "everything uploaded was removed" : aborted.error().to_string().c_str());
      return 1;
    }
    keys.push_back(put.key);
    manifest += "\"" + name + "\",";
  }
  manifest.back() = ']';
  manifest += "}";
  actors::put_request put_manifest;
  put_manifest.key = events::manifest_key(id);
  put_manifest.group_id = group;
  put_manifest.data_type = v1::DATA_TYPE_METADATA;
  auto m = store.put_object(put_manifest, manifest);
  if (!m) return std::fprintf(stderr, "manifest: %s\n", m.error().to_string().c_str()), 1;

  events::manifest_ref ref{put_manifest.key, m->record.sha256, "",
                           events::payload_keys_sha256(keys), keys.size(), bytes};
  auto committed = store.commit_import({id, 1, ref, keys, "example", "", {}}).get();
  if (!committed) return std::fprintf(stderr, "commit: %s\n", committed.error().to_string().c_str()), 1;
  std::printf("published %s: %s, generation %llu, %zu payloads, %llu bytes\n",
              events::canonical_text(id).c_str(),
              v1::Availability_Name(committed->record.availability).c_str(),
              static_cast<unsigned long long>(committed->record.metadata_generation), keys.size(),
              static_cast<unsigned long long>(bytes));

  if (generation > 1) {  // retire the previous generation
    events::revision_key previous = id;
    previous.generation = generation - 1;
    auto view = store.get_revision({previous, false}).get();
    if (view) {
      auto removed = store.remove_revision({previous, view->record.metadata_generation, 0, "example", ""}).get();
      if (removed)
        std::printf("removed %s: %zu objects, manifest last\n",
                    events::canonical_text(previous).c_str(), removed->removed_keys.size());
    }
  }
  auto listed = store.list_revisions(all).get();
  for (const auto& v : listed->revisions)
    std::printf("  %s %s\n", events::canonical_text(v.record.id).c_str(),
                v1::Availability_Name(v.record.availability).c_str());
  return 0;
}
