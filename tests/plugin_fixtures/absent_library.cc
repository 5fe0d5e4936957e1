// libjaxpp_absent_for_tests.so: a library that jaxpp_fake_plugin_missing_lib needs and that is
// not on the library path when the tests open that module (tests/plugin_fixtures/fake_plugin.cc).
__attribute__((visibility("default"))) int jaxpp_absent_for_tests_value() { return 42; }
