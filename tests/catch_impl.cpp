// Catch2's implementation, compiled once for both test programs (saccade_tests and the data-parallel
// saccade_ddp_tests, each with its own main): CATCH_CONFIG_RUNNER brings the implementation without a main.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.h"

int saccade::testing::run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }
