// Fuzz inputs are invalid protobuf by the million: protobuf's own complaints
// (invalid UTF-8 in a string field, ...) would be most of the run's time and
// output. The decoders' verdicts are what the targets check.
#pragma once

#include <google/protobuf/stubs/logging.h>

#include <string>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  return 0;
}
