// The read RPCs' rules (core/reads.hpp) on a fold, as a standby answers
// them: the same defaults, checks and errors as the leader's registry.
#include <doctest/doctest.h>

#include "core/reads.hpp"

using namespace weightd;
using namespace weightd::actors;
namespace v1 = events::v1;

namespace {

/// A fold holding READY revisions `names` of default/default and one of
/// tenant "other", and an operation on the first.
events::store_state fold_with(std::initializer_list<const char*> names) {
  events::store_state fold;
  for (auto name : names) {
    events::revision_record r;
    r.id = {"default", "default", name, "main", 1};
    r.availability = v1::READY;
    fold.revisions.revisions[r.id] = r;
  }
  events::revision_record theirs;
  theirs.id = {"other", "default", "theirs", "main", 1};
  theirs.availability = v1::READY;
  fold.revisions.revisions[theirs.id] = theirs;
  events::operation_record op;
  op.id = 7;
  op.revision = {"default", "default", *names.begin(), "main", 1};
  fold.revisions.operations[op.id] = op;
  return fold;
}

}  // namespace

TEST_CASE("reads: ListRevisions without tenant and namespace lists default/default, in pages that resume by token") {
  auto fold = fold_with({"a", "b", "c"});
  list_revisions q;
  q.tenant = "";
  q.ns = "";
  q.limit = 2;
  auto first = list_revisions_in(fold, q);
  REQUIRE(first.ok());
  REQUIRE(first->revisions.size() == 2);
  CHECK(first->revisions[0].record.id.resource == "a");
  CHECK(first->revisions[1].record.id.resource == "b");
  REQUIRE_FALSE(first->next_page_token.empty());
  q.page_token = first->next_page_token;
  auto second = list_revisions_in(fold, q);
  REQUIRE(second.ok());
  REQUIRE(second->revisions.size() == 1);
  CHECK(second->revisions[0].record.id.resource == "c");
  CHECK(second->next_page_token.empty());
}

TEST_CASE("reads: a bad listing names its field, a hidden revision needs include_hidden") {
  auto fold = fold_with({"a"});
  list_revisions q;
  q.limit = 1001;
  auto refused = list_revisions_in(fold, q);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == errc::invalid_argument);
  CHECK(refused.error().message().find("limit") != std::string::npos);

  fold.revisions.revisions.begin()->second.availability = v1::IMPORTING;
  get_revision get{{"default", "default", "a", "main", 1}};
  CHECK(get_revision_in(fold, get).error().code() == errc::not_found);
  get.include_hidden = true;
  CHECK(get_revision_in(fold, get).ok());
}

TEST_CASE("reads: an operation of another tenant, or none, is NOT_FOUND, operation 0 is INVALID_ARGUMENT") {
  auto fold = fold_with({"a"});
  CHECK(get_operation_in(fold, {7, ""}).ok());
  CHECK(get_operation_in(fold, {7, "default"}).ok());
  CHECK(get_operation_in(fold, {7, "other"}).error().code() == errc::not_found);
  CHECK(get_operation_in(fold, {8, ""}).error().code() == errc::not_found);
  CHECK(get_operation_in(fold, {0, ""}).error().code() == errc::invalid_argument);
}

TEST_CASE("reads: a lineage with a revision but no claim has watermark 0, one without a revision is NOT_FOUND") {
  auto fold = fold_with({"a"});
  auto known = get_lineage_in(fold, {{"default", "default", "a", "main", 0}});
  REQUIRE(known.ok());
  CHECK(known->watermark == 0);
  CHECK_FALSE(known->claim);
  auto unknown = get_lineage_in(fold, {{"default", "default", "a", "other", 0}});
  CHECK(unknown.error().code() == errc::not_found);
  auto bad = get_lineage_in(fold, {{"default", "default", "", "main", 0}});
  CHECK(bad.error().code() == errc::invalid_argument);
  CHECK(bad.error().message().find("lineage") != std::string::npos);
}
