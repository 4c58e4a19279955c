#include "persistence/event_codec.hpp"

#include "events/event_type.hpp"
#include "events/identity.hpp"
#include "events/upcast.hpp"
#include "persistence/journal_backend.hpp"
#include "persistence/record.hpp"

namespace weightd::persistence {

std::string encode_event(const events::v1::Envelope& e) {
  return encode_record(be64(e.global_seq()), e.SerializeAsString());
}

result<events::v1::Envelope> decode_event(uint64_t seq, std::string_view record) {
  auto body = decode_record(be64(seq), record);
  events::v1::Envelope e;
  if (!body || !e.ParseFromArray(body->data(), static_cast<int>(body->size())))
    return status{errc::data_loss,
                  "journal record seq " + std::to_string(seq) +
                      " failed its checksum (the file is damaged); stop weightd, keep a "
                      "copy of the journal directory and run `weightctl journal verify`"};
  if (e.global_seq() != seq)
    return status{errc::data_loss, "journal record under seq " + std::to_string(seq) +
                                       " claims seq " + std::to_string(e.global_seq())};
  if (auto st = events::upcast(e); !st.ok()) return st;
  return e;
}

std::string encode_snapshot_body(std::string_view stream, int64_t timestamp_ms,
                                 std::string_view data) {
  std::string body = be64(static_cast<uint64_t>(timestamp_ms));
  body += be64(stream.size()).substr(4);
  body.append(stream.data(), stream.size());
  body.append(data.data(), data.size());
  return body;
}

bool decode_snapshot_body(std::string_view body, std::string& stream, int64_t& timestamp_ms,
                          std::string& data) {
  if (body.size() < 12) return false;
  timestamp_ms = static_cast<int64_t>(read_be64(body));
  uint64_t len = read_be64(std::string(4, '\0') + std::string(body.substr(8, 4)));
  if (body.size() < 12 + len) return false;
  stream.assign(body.substr(12, len));
  data.assign(body.substr(12 + len));
  return true;
}

status read_type(const journal_backend& journal, std::string_view type, seq_range range,
                 const event_visitor& visit) {
  uint64_t matched = 0;
  if (range.max == 0) return {};
  return journal.read({range.from, range.to, kMaxSeq}, [&](const Envelope& e) {
    if (events::event_type_name(e) != type) return true;
    return visit(e) && ++matched < range.max;
  });
}

result<std::optional<events::v1::LeadershipTaken>> leadership_above(const journal_backend& journal,
                                                                    uint64_t epoch) {
  std::optional<events::v1::LeadershipTaken> found;
  auto st = journal.read_stream(events::kSystemStream, {}, [&](const Envelope& e) {
    if (!e.has_leadership_taken() || e.leadership_taken().epoch() <= epoch) return true;
    found = e.leadership_taken();
    return false;
  });
  if (!st.ok()) return st;
  return found;
}

status validate_batch(const std::vector<Envelope>& batch) {
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& e = batch[i];
    auto where = "event " + std::to_string(i) + " of the batch";
    if (e.stream().empty())
      return {errc::invalid_argument, where + " has no stream; every event belongs to one"};
    if (e.payload_case() == Envelope::PAYLOAD_NOT_SET)
      return {errc::invalid_argument, where + " has no payload"};
    if (e.ByteSizeLong() > kMaxEventBytes)
      return {errc::invalid_argument, where + " is " + std::to_string(e.ByteSizeLong()) +
                                          " bytes, above the limit of " +
                                          std::to_string(kMaxEventBytes)};
  }
  return {};
}

}  // namespace weightd::persistence

namespace weightd::persistence {
status stamp_event(events::v1::Envelope& e, uint64_t global_seq, uint64_t stream_seq,
                   uint64_t writer_id, numbering how, uint64_t& epoch) {
  if (how == numbering::assign && e.epoch() == 0) e.set_epoch(epoch);
  if (e.epoch() < epoch)
    return {errc::data_loss, "an event of epoch " + std::to_string(e.epoch()) +
                                 " cannot follow epoch " + std::to_string(epoch) +
                                 " in this journal: it comes from a former leader"};
  // A copy must also fold: a new epoch begins with the leadership_taken of it.
  if (how == numbering::copied && e.epoch() > epoch &&
      !(e.has_leadership_taken() && e.leadership_taken().epoch() == e.epoch()))
    return {errc::invalid_argument, "copied event " + std::to_string(e.global_seq()) +
                                        " begins epoch " + std::to_string(e.epoch()) +
                                        " without its leadership_taken"};
  epoch = e.epoch();
  if (how == numbering::copied) {
    if (e.global_seq() == global_seq && e.stream_seq() == stream_seq) return {};
    return {errc::invalid_argument,
            "copied event " + std::to_string(e.global_seq()) + " (stream '" + e.stream() + "' seq " +
                std::to_string(e.stream_seq()) + ") is not the next one here: global seq " +
                std::to_string(global_seq) + ", stream seq " + std::to_string(stream_seq) +
                "; this journal is not a prefix of the leader's"};
  }
  e.set_global_seq(global_seq);
  e.set_stream_seq(stream_seq);
  if (e.writer_id() == 0) e.set_writer_id(writer_id);
  if (e.schema_version() == 0) e.set_schema_version(events::kSchemaVersion);
  return {};
}
}  // namespace weightd::persistence
