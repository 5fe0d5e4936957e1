// A command whose standard output cannot be written (a full disk, a closed descriptor) fails:
// what it prints there is its result (sweep 5: every command exited 0 with a full disk).
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/cli_runner.h"

namespace jaxpp::testing {
namespace {

// The command with its standard output sent to `target` ("/dev/full", or "&-" to close it);
// stderr is still captured.
CliResult with_stdout(const std::string& target, const std::string& args) {
  return run_cli_with_launcher("sh -c 'exec \"$0\" \"$@\" >" + target + "' ", args);
}

TEST(StdoutErrors, AFullDiskFailsTheCommand) {
  for (const std::string args :
       {"schedules", "schedules --json", "show --schedule 1f1b --pp 2 --microbatches 2",
        "simulate --schedule 1f1b --pp 2 --microbatches 4 --t-f 1 --t-b 1 --json"}) {
    const CliResult r = with_stdout("/dev/full", args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(": error: cannot write the standard output"),
              std::string::npos)
        << args << "\n" << r.err;
  }
}

TEST(StdoutErrors, AClosedStdoutFailsTheCommand) {
  const CliResult r = with_stdout("&-", "schedules");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("jaxpp-sim schedules: error: cannot write the standard output"),
            std::string::npos)
      << r.err;
}

TEST(StdoutErrors, AWritableStdoutStillSucceeds) {
  const CliResult r = with_stdout("/dev/null", "schedules");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

}  // namespace
}  // namespace jaxpp::testing
