// The one persist-and-apply error policy (actors/journaled.hpp), on the
// function every actor's committed batch goes through.
#include <doctest/doctest.h>

#include <vector>

#include "actors/journaled.hpp"

using namespace weightd;
using namespace weightd::actors;

namespace {
events::v1::Envelope at_seq(uint64_t seq) {
  events::v1::Envelope e;
  e.set_global_seq(seq);
  return e;
}
}  // namespace

TEST_CASE("persist and apply: a fold that refuses a committed event stops there, says INTERNAL "
          "naming the seq, and the batch's after-step still runs") {
  std::vector<uint64_t> folded;
  std::vector<size_t> after_batches;  // the size of each batch `after` saw
  journaled how{{}, {}, "revision t/ns/r@main#1",
                [&](const events::v1::Envelope& e) -> status {
                  if (e.global_seq() == 8) return {errc::conflict, "the fence moved"};
                  folded.push_back(e.global_seq());
                  return {};
                },
                [&](const std::vector<events::v1::Envelope>& batch) {
                  after_batches.push_back(batch.size());
                }};
  auto applied = apply_committed(how, {at_seq(7), at_seq(8), at_seq(9)});
  CHECK(applied.code() == errc::internal);
  CHECK(applied.message().find("revision t/ns/r@main#1") != std::string::npos);
  CHECK(applied.message().find("seq 8") != std::string::npos);
  CHECK(folded == std::vector<uint64_t>{7});
  CHECK(after_batches == std::vector<size_t>{3});
  CHECK(apply_committed(how, {at_seq(10)}).ok());
}
