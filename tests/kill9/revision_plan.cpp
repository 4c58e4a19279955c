// What a load client imports (load.hpp, plan_revision): one to three
// payloads of long-tailed sizes and the manifest `weightctl import` would
// write for them, so that `weightctl export` can read the revision too.
#include <google/protobuf/util/json_util.h>

#include <random>

#include "kill9/load.hpp"

namespace weightd::kill9 {

namespace {

/// Payload sizes with a long tail: mostly small objects (many events per
/// second), some large enough to need several 4 MiB chunks on the wire.
uint64_t payload_size(std::mt19937_64& rng) {
  auto roll = rng() % 100;
  if (roll < 60) return 4096 + rng() % (252u << 10);
  if (roll < 90) return (256u << 10) + rng() % (1792u << 10);
  return (4u << 20) + rng() % (4u << 20);
}
/// The manifest `weightctl import` would write for these payloads (one file
/// per payload), so that `weightctl export` could read the revision too.
std::string manifest_json(const std::vector<member>& payloads) {
  v1::ModelManifest manifest;
  manifest.set_format("weightd.model/1");
  for (const auto& p : payloads) {
    auto* f = manifest.add_files();
    f->set_path(p.affinity);
    f->set_size(p.bytes.size);
    f->set_sha256(p.bytes.sha256);
    auto* chunk = f->add_chunks();
    chunk->set_key(p.key);
    chunk->set_offset(0);
    chunk->set_size(p.bytes.size);
  }
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  google::protobuf::util::MessageToJsonString(manifest, &out, o);
  return out;
}

}  // namespace

revision_model plan_revision(client_model& model, uint64_t rng_seed) {
  std::mt19937_64 rng{rng_seed};
  revision_model r;
  r.id.tenant = kTenant;
  r.id.ns = kNamespace;
  r.id.resource = "c" + std::to_string(model.index) + "-" + std::to_string(model.next_name++);
  r.id.revision = "main";
  r.id.generation = 1;
  r.text = events::canonical_text(r.id);
  auto manifest = events::manifest_key(r.id);
  auto files = manifest.substr(0, manifest.size() - std::string{"manifest"}.size()) + "files/";
  auto count = 1 + rng() % 3;
  for (uint64_t i = 0; i < count; ++i) {
    member p;
    p.affinity = "w" + std::to_string(i) + ".bin";  // one file, one payload, one unit
    p.key = files + p.affinity;
    p.bytes = generated_blob(payload_size(rng), rng());
    r.payloads.push_back(std::move(p));
  }
  r.manifest.key = manifest;
  r.manifest.bytes = literal_blob(manifest_json(r.payloads));
  return r;
}

}  // namespace weightd::kill9
