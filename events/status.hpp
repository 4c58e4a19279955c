// The one error vocabulary of weightd (SPEC §5), shared by every layer.
//
// Each code has exactly one gRPC status (api/common/grpc_status.cpp maps them, in one
// place). Messages say what happened *and what to do*: "... re-read the
// revision and retry", "... restart weightd", never just "failed".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace weightd {

enum class errc : uint8_t {
  ok = 0,
  invalid_argument,      // malformed request; the message names the field
  not_found,             // unknown revision, lease, operation, object, group, manifest
  conflict,              // exists with other parameters, wrong state, mismatched group
  stale_generation,      // expected_metadata_generation is not current
  not_ready,             // the state cannot accept this
  busy,                  // a lease or operation blocks it; the message names them
  lease_expired,         // renew of an expired lease
  policy_unsatisfiable,  // PINNED, MIXED with fewer than 2 units
  generation_exhausted,  // a generation counter cannot advance
  durability_failed,     // the journal could not persist; nothing was published
  managed_object,        // generic remove of a managed revision's member
  object_has_lease,      // non-forced remove of a leased object
  object_already_exists, // put of a live key
  no_available_space,    // tier full even after eviction
  unauthenticated,
  permission_denied,
  data_loss,             // a stored record failed its checksum (names the seq)
  internal,              // a bug or an unexpected system error
  resource_exhausted,    // a per-client or global limit is reached; the message names it
  unimplemented,         // an RPC this version does not serve yet
  not_leader,            // a standby: writes go to the leader (SPEC §11; weightd-leader names it)
};
/// The highest code (codes run 1..kLastErrc without gaps).
inline constexpr errc kLastErrc = errc::not_leader;

/// "INVALID_ARGUMENT", "NOT_FOUND", ... (the names clients see in metadata).
const char* code_name(errc code);

/// The outcome of an operation that returns nothing else.
class [[nodiscard]] status {
 public:
  status() = default;
  status(errc code, std::string message) : code_(code), message_(std::move(message)) {}
  static status success() { return {}; }

  bool ok() const { return code_ == errc::ok; }
  explicit operator bool() const { return ok(); }
  errc code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "DURABILITY_FAILED: journal commit failed (...); restart weightd"
  std::string to_string() const;

 private:
  errc code_ = errc::ok;
  std::string message_;
};

/// A value or the status that explains why there is none.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : value_(std::move(value)) {}
  result(status error) : error_(std::move(error)) {}
  result(errc code, std::string message) : error_(code, std::move(message)) {}

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const status& error() const { return error_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  status error_;
};

}  // namespace weightd
