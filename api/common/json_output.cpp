#include "api/common/json_output.hpp"

#include <google/protobuf/descriptor.h>

#include <memory>
#include <optional>
#include <type_traits>

#include "api/common/enum_names.hpp"

namespace weightd::api {

namespace pb = google::protobuf;
using json = nlohmann::ordered_json;

namespace {

std::string base64(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += alphabet[(n >> s) & 63];
  }
  if (size_t rest = bytes.size() - i) {
    uint32_t n = uint8_t(bytes[i]) << 16;
    if (rest == 2) n |= uint8_t(bytes[i + 1]) << 8;
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += rest == 2 ? alphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

json enum_json(const pb::EnumDescriptor* d, int value) {
  // A number this build does not know (a newer daemon) stays a number.
  if (!d->FindValueByNumber(value)) return value;
  return short_enum_name(value, d);
}

/// One value of a field: element `index` of a repeated field, else the field.
json value_json(const pb::Message& m, const pb::FieldDescriptor* f, int index) {
  const auto* r = m.GetReflection();
  bool rep = f->is_repeated();
  using F = pb::FieldDescriptor;
  switch (f->cpp_type()) {
    case F::CPPTYPE_INT32: return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case F::CPPTYPE_INT64: return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case F::CPPTYPE_UINT32: return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case F::CPPTYPE_UINT64: return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case F::CPPTYPE_DOUBLE: return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case F::CPPTYPE_FLOAT: return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case F::CPPTYPE_BOOL: return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case F::CPPTYPE_ENUM:
      return enum_json(f->enum_type(),
                       rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f));
    case F::CPPTYPE_STRING: {
      auto s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      // Bytes are base64, as in protobuf's own JSON mapping.
      if (f->type() == F::TYPE_BYTES) return base64(s);
      return s;
    }
    case F::CPPTYPE_MESSAGE:
      return message_json(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

/// A map entry's key as a JSON object key.
std::string map_key(const pb::Message& entry) {
  const auto* f = entry.GetDescriptor()->FindFieldByNumber(1);
  auto v = value_json(entry, f, -1);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

json message_json(const pb::Message& m) {
  json out = json::object();
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->is_map()) {
      json map = json::object();
      for (int k = 0; k < r->FieldSize(m, f); ++k) {
        const auto& entry = r->GetRepeatedMessage(m, f, k);
        map[map_key(entry)] = value_json(entry, entry.GetDescriptor()->FindFieldByNumber(2), -1);
      }
      out[f->name()] = std::move(map);
    } else if (f->is_repeated()) {
      json list = json::array();
      for (int k = 0; k < r->FieldSize(m, f); ++k) list.push_back(value_json(m, f, k));
      out[f->name()] = std::move(list);
    } else if (const auto* oneof = f->real_containing_oneof()) {
      // Of a oneof, only the member that is set (an envelope has one payload).
      if (r->GetOneofFieldDescriptor(m, oneof) == f) out[f->name()] = value_json(m, f, -1);
    } else {
      // Every field present (SPEC §10): an unset message is one of zero values.
      out[f->name()] = value_json(m, f, -1);
    }
  }
  return out;
}

namespace {

status bad_value(const pb::FieldDescriptor* f, const json& v) {
  return {errc::invalid_argument, "field " + f->full_name() + " cannot hold " + v.dump()};
}

template <class T>
bool number_of(const json& v, T* out) {
  if (v.is_number_integer() || v.is_number_float()) {
    *out = v.get<T>();
    return true;
  }
  if (v.is_string()) {  // protobuf's own JSON writes 64-bit numbers as strings
    try {
      if constexpr (std::is_floating_point_v<T>) *out = static_cast<T>(std::stod(v.get<std::string>()));
      else if constexpr (std::is_signed_v<T>) *out = static_cast<T>(std::stoll(v.get<std::string>()));
      else *out = static_cast<T>(std::stoull(v.get<std::string>()));
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }
  return false;
}

std::optional<int> enum_value_of(const pb::EnumDescriptor* d, const json& v) {
  if (v.is_number_integer()) return v.get<int>();
  if (!v.is_string()) return std::nullopt;
  auto name = v.get<std::string>();
  if (const auto* e = d->FindValueByName(name)) return e->number();
  for (int i = 0; i < d->value_count(); ++i)
    if (short_enum_name(d->value(i)->number(), d) == name) return d->value(i)->number();
  return std::nullopt;
}

/// Sets field `f` of `m` (or adds to it, when repeated) from `v`.
status set_value(pb::Message* m, const pb::FieldDescriptor* f, const json& v) {
  const auto* r = m->GetReflection();
  bool rep = f->is_repeated();
  using F = pb::FieldDescriptor;
#define WEIGHTD_SET_NUMBER(T, Setter)                                   \
  {                                                                     \
    T x{};                                                              \
    if (!number_of(v, &x)) return bad_value(f, v);                      \
    rep ? r->Add##Setter(m, f, x) : r->Set##Setter(m, f, x);            \
    return {};                                                          \
  }
  switch (f->cpp_type()) {
    case F::CPPTYPE_INT32: WEIGHTD_SET_NUMBER(int32_t, Int32)
    case F::CPPTYPE_INT64: WEIGHTD_SET_NUMBER(int64_t, Int64)
    case F::CPPTYPE_UINT32: WEIGHTD_SET_NUMBER(uint32_t, UInt32)
    case F::CPPTYPE_UINT64: WEIGHTD_SET_NUMBER(uint64_t, UInt64)
    case F::CPPTYPE_DOUBLE: WEIGHTD_SET_NUMBER(double, Double)
    case F::CPPTYPE_FLOAT: WEIGHTD_SET_NUMBER(float, Float)
    case F::CPPTYPE_BOOL:
      if (!v.is_boolean()) return bad_value(f, v);
      rep ? r->AddBool(m, f, v.get<bool>()) : r->SetBool(m, f, v.get<bool>());
      return {};
    case F::CPPTYPE_ENUM: {
      auto e = enum_value_of(f->enum_type(), v);
      if (!e) return bad_value(f, v);
      rep ? r->AddEnumValue(m, f, *e) : r->SetEnumValue(m, f, *e);
      return {};
    }
    case F::CPPTYPE_STRING:
      if (!v.is_string() || f->type() == F::TYPE_BYTES) return bad_value(f, v);
      rep ? r->AddString(m, f, v.get<std::string>()) : r->SetString(m, f, v.get<std::string>());
      return {};
    case F::CPPTYPE_MESSAGE: {
      if (rep) return message_from_json(v, r->AddMessage(m, f));
      // message_json prints an unset message as one of zeros: reading it
      // back leaves the field unset, so that the round trip is exact.
      std::unique_ptr<pb::Message> parsed{r->GetMessage(*m, f).New()};
      if (auto st = message_from_json(v, parsed.get()); !st.ok()) return st;
      if (parsed->ByteSizeLong() > 0) r->MutableMessage(m, f)->CopyFrom(*parsed);
      return {};
    }
  }
#undef WEIGHTD_SET_NUMBER
  return bad_value(f, v);
}

}  // namespace

status message_from_json(const json& j, pb::Message* m) {
  if (!j.is_object())
    return {errc::invalid_argument, m->GetDescriptor()->full_name() + " must be a JSON object"};
  const auto* d = m->GetDescriptor();
  for (const auto& [name, v] : j.items()) {
    const auto* f = d->FindFieldByName(name);
    if (!f || v.is_null()) continue;
    if (f->is_map()) {
      if (!v.is_object()) return bad_value(f, v);
      for (const auto& [key, value] : v.items()) {
        auto* entry = m->GetReflection()->AddMessage(m, f);
        const auto* ed = entry->GetDescriptor();
        json k = ed->FindFieldByNumber(1)->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING
                     ? json(key)
                     : json::parse(key, nullptr, false);
        if (auto st = set_value(entry, ed->FindFieldByNumber(1), k); !st.ok()) return st;
        if (auto st = set_value(entry, ed->FindFieldByNumber(2), value); !st.ok()) return st;
      }
    } else if (f->is_repeated()) {
      if (!v.is_array()) return bad_value(f, v);
      for (const auto& item : v)
        if (auto st = set_value(m, f, item); !st.ok()) return st;
    } else if (auto st = set_value(m, f, v); !st.ok()) {
      return st;
    }
  }
  return {};
}

namespace {

void write_line(const json& j, std::string& out) {
  if (j.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      if (!first) out += ", ";
      first = false;
      out += json(key).dump();
      out += ": ";
      write_line(value, out);
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += ", ";
      write_line(j[i], out);
    }
    out += ']';
  } else {
    out += j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

}  // namespace

std::string json_line(const json& j) {
  std::string out;
  write_line(j, out);
  return out;
}

json list_document(json items, const std::string& next_page_token) {
  json doc = json::object();
  bool empty = items.empty();
  doc["items"] = std::move(items);
  if (!empty) doc["next_page_token"] = next_page_token;
  return doc;
}

}  // namespace weightd::api
