#pragma once
// The test programs' one entry into Catch2 (tests/catch_impl.cpp compiles its implementation once for both
// saccade_tests and saccade_ddp_tests).

namespace saccade::testing {

/// Runs Catch2's session over the command line (Catch::Session().run): the number of failed tests (0 when all
/// passed), as a main returns it.
int run_catch_session(int argc, char** argv);

}  // namespace saccade::testing
