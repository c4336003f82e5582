// saccade_tests' main: Catch2's default session (its implementation: tests/catch_impl.cpp).
#include "catch_session.h"

int main(int argc, char** argv) { return saccade::testing::run_catch_session(argc, argv); }
