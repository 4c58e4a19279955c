// weightctl's --json contract (SPEC §10), written once for every command: a
// protobuf message becomes JSON by reflection with the proto's field names,
// every field present (zero values too; an unset message field is null),
// enums by their short names ("HOT", "READY"), 64-bit numbers as JSON
// numbers, maps as objects. A list command prints
// {"items": [...], "next_page_token": "..."}; an empty list {"items": []}.
// A standby writes the events it sets aside (diverged-<epoch>.ndjson) in the
// same form, one event per line, as `weightctl journal dump --json` prints.
#pragma once

#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "events/status.hpp"

namespace weightd::api {

/// The message as a JSON value (see above).
nlohmann::ordered_json message_json(const google::protobuf::Message& m);

/// The inverse of message_json, for programs that read weightctl's --json
/// back into protobuf messages (tests, hosts): short or full enum names,
/// numbers or numeric strings, null for an absent message; unknown fields
/// are skipped. INVALID_ARGUMENT naming the field when a value does not fit.
status message_from_json(const nlohmann::ordered_json& j, google::protobuf::Message* m);

/// One line of JSON in the SPEC's style: `{"items": [], "ok": true}` (", " and
/// ": " between parts, no newline inside).
std::string json_line(const nlohmann::ordered_json& j);

/// A list command's one document: the items and, when there are any, the
/// token of the next page ("" once the list is complete).
nlohmann::ordered_json list_document(nlohmann::ordered_json items, const std::string& next_page_token = "");

/// message_json of each message, as a list document.
template <class Messages>
nlohmann::ordered_json list_of(const Messages& messages, const std::string& next_page_token = "") {
  auto items = nlohmann::ordered_json::array();
  for (const auto& m : messages) items.push_back(message_json(m));
  return list_document(std::move(items), next_page_token);
}

}  // namespace weightd::api
