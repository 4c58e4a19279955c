// The test binaries' main: doctest's, plus one rule. ctest runs each case
// as `--test-case=<its name>`; a name CMake or doctest cannot pass through
// whole (a ';' splits it into two "tests") matches nothing, and doctest
// would call that run a success. Here a run whose filters matched no test
// case fails, naming why.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>

namespace {

bool matched_nothing = false;

struct matched_nothing_listener : doctest::IReporter {
  explicit matched_nothing_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    matched_nothing = stats.numTestCasesPassingFilters == 0;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("matched_nothing", 1, matched_nothing_listener);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  int failed = context.run();
  if (context.shouldExit()) return failed;  // --help, --list-test-cases, ...
  if (failed == 0 && matched_nothing) {
    std::cerr << "no test case matched the filters: a test name with ';' is split by CMake; "
                 "use ',' instead\n";
    return 1;
  }
  return failed;
}
