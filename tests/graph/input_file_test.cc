// Reading input files (graph/input_file.h) and strict JSON parsing (parse_json_text in
// graph/json_util.h): what a file is, its size, NUL bytes, nesting depth and duplicate keys.
#include "graph/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/error.h"
#include "graph/json_util.h"
#include "graph/limits.h"
#include "tests/testing/input_error.h"

namespace jaxpp {
namespace {

namespace fs = std::filesystem;

class InputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("jaxpp-input-file-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }

  fs::path dir_;
};

std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST_F(InputFileTest, ReadsARegularFileWhole) {
  EXPECT_EQ(read_input_text(write("a.json", "{\"a\": 1}\n")), "{\"a\": 1}\n");
}

TEST_F(InputFileTest, FollowsASymlinkToARegularFile) {
  const std::string target = write("a.json", "[]");
  fs::create_symlink(target, path("link.json"));
  EXPECT_EQ(read_input_text(path("link.json")), "[]");
}

TEST_F(InputFileTest, MissingFileSaysSo) {
  EXPECT_EQ(error_of([&] { read_input_text(path("none.json")); }),
            path("none.json") + ": cannot read file: No such file or directory");
}

TEST_F(InputFileTest, EmptyFileNameIsNamedInTheMessage) {
  // Was: "cannot read file: No such file or directory" with no name (`--corpus ""`).
  EXPECT_EQ(error_of([&] { read_input_text(""); }),
            "\"\" (an empty file name): cannot read file: No such file or directory");
}

TEST_F(InputFileTest, InvalidUtf8IsRefusedWithItsPosition) {
  // Was: read as bytes; a CSV cell of Latin-1 later made nlohmann's dump throw (no InputError).
  const std::string good = write("good.csv", "a,\xE2\x82\xAC,\xF0\x9F\x98\x80,\xC3\xA9\n");
  EXPECT_EQ(read_input_text(good), "a,\xE2\x82\xAC,\xF0\x9F\x98\x80,\xC3\xA9\n");
  EXPECT_EQ(error_of([&] { read_input_text(write("latin1.csv", "id\nr\xE9sum\xE9\n")); }),
            path("latin1.csv") +
                ":2:2: is not valid UTF-8 (byte 0xe9 at byte offset 4); input files must be UTF-8 "
                "text");
  // Overlong "/", a surrogate, above U+10FFFF, a sequence cut short, a lone continuation byte.
  for (const char* bad : {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82", "\x80"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(error_of([&] { read_input_text(write("bad.txt", std::string("x") + bad)); }),
                ::testing::HasSubstr(":1:2: is not valid UTF-8"));
  }
}

// An error message is one line of UTF-8: control characters and bytes that start no valid UTF-8
// sequence are escaped (a flag value of Latin-1 bytes reached stderr raw); valid UTF-8 is kept.
TEST(OneLine, EscapesControlCharactersAndBytesThatAreNotUtf8) {
  EXPECT_EQ(one_line("a\nb\x1b[31m"), "a\\nb\\x1b[31m");
  EXPECT_EQ(one_line("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(one_line("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82");
  EXPECT_EQ(one_line("\xc3"), "\\xc3");               // truncated
  EXPECT_EQ(one_line("\xc0\xaf"), "\\xc0\\xaf");    // overlong
  EXPECT_EQ(one_line("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(std::string(InputError("--model \xff: no such file").what()),
            "--model \\xff: no such file");
}

TEST_F(InputFileTest, DirectoryIsNotReadAsAnEmptyFile) {
  EXPECT_EQ(error_of([&] { read_input_text(dir_.string()); }),
            dir_.string() + ": is a directory, not a file");
}

TEST_F(InputFileTest, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path("pipe").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_input_text(path("pipe")); }),
            path("pipe") + ": is not a regular file (a FIFO)");
}

TEST_F(InputFileTest, CharacterDeviceIsRefusedWithoutBeingRead) {
  EXPECT_EQ(error_of([] { read_input_text("/dev/zero"); }),
            "/dev/zero: is not a regular file (a character device)");
}

TEST_F(InputFileTest, FileAboveTheSizeLimitIsRefusedBeforeReading) {
  const std::string big = path("big.json");
  std::ofstream(big).close();
  fs::resize_file(big, uintmax_t{12} << 30);  // sparse: no disk used
  EXPECT_EQ(error_of([&] { read_input_text(big); }), big + ": is 12 GiB, the limit is 256 MiB");
}

TEST_F(InputFileTest, FileAtTheCallersLimitIsRead) {
  const std::string p = write("a.csv", std::string(100, 'x'));
  EXPECT_EQ(read_input_text(p, 100).size(), 100u);
  EXPECT_EQ(error_of([&] { read_input_text(p, 99); }), p + ": is 100 bytes, the limit is 99 bytes");
}

TEST_F(InputFileTest, NulByteIsAnErrorWithItsPosition) {
  const std::string p = write("a.json", std::string("{\"a\": 1}\n  \0{\"b\": 2}", 20));
  EXPECT_EQ(error_of([&] { read_input_text(p); }),
            p + ":2:3: contains a NUL byte (byte offset 11); input files must be text");
}

TEST_F(InputFileTest, CheckInputFileNeedsNoReading) {
  ASSERT_EQ(::mkfifo(path("pipe").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { check_input_file(path("pipe")); }),
            path("pipe") + ": is not a regular file (a FIFO)");
  EXPECT_EQ(error_of([&] { check_input_file(write("a.json", "{}")); }), "<no error>");
}

TEST_F(InputFileTest, PathExistsSeesADanglingSymlink) {
  fs::create_symlink(path("nowhere"), path("dangling"));
  EXPECT_TRUE(path_exists(path("dangling")));
  EXPECT_FALSE(path_exists(path("nowhere")));
}

TEST(FormatFileSize, UsesTheLargestExactUnitOrAddsTheBytes) {
  EXPECT_EQ(format_file_size(4096), "4096 bytes");
  EXPECT_EQ(format_file_size(kMaxInputFileBytes), "256 MiB");
  EXPECT_EQ(format_file_size((int64_t{3} << 20) / 2), "1.5 MiB (1572864 bytes)");
  EXPECT_EQ(format_file_size(int64_t{12} << 30), "12 GiB");
}

TEST(ParseJsonText, NestingAtTheLimitIsAccepted) {
  EXPECT_TRUE(parse_json_text(nested_arrays(kMaxJsonDepth), "a.json").is_array());
}

TEST(ParseJsonText, NestingBeyondTheLimitIsAnErrorNamingTheFile) {
  EXPECT_EQ(error_of([] { parse_json_text(nested_arrays(kMaxJsonDepth + 1), "deep.json"); }),
            "deep.json: nesting deeper than 64 levels");
}

TEST(ParseJsonText, VeryDeepNestingDoesNotExhaustTheStack) {
  const std::string text = std::string(1'000'000, '[');  // unterminated, too
  EXPECT_EQ(error_of([&] { parse_json_text(text, "deep.json"); }),
            "deep.json: nesting deeper than 64 levels");
}

TEST(ParseJsonText, ObjectsCountTowardsTheDepthLikeArrays) {
  std::string text;
  for (int i = 0; i <= kMaxJsonDepth; ++i) text += "{\"a\": ";
  text += "1" + std::string(kMaxJsonDepth + 1, '}');
  EXPECT_EQ(error_of([&] { parse_json_text(text, "deep.json"); }),
            "deep.json: nesting deeper than 64 levels");
}

TEST(ParseJsonText, DuplicateTopLevelKeyIsAnError) {
  EXPECT_EQ(error_of([] { parse_json_text(R"({"pp": 2, "tp": 1, "pp": 4})", "c.json"); }),
            "c.json: field 'pp': duplicate key (a JSON object names each field once)");
}

TEST(ParseJsonText, DuplicateKeyIsNamedByItsPath) {
  const std::string text =
      R"({"config": {"pp": 2}, "events": [{"a": 1}, {"b": [0, {"c": 1, "c": 2}]}]})";
  EXPECT_EQ(
      error_of([&] { parse_json_text(text, "t.json"); }),
      "t.json: field 'events[1].b[1].c': duplicate key (a JSON object names each field once)");
}

TEST(ParseJsonText, SameKeyInDifferentObjectsIsFine) {
  const nlohmann::json j =
      parse_json_text(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}, {"x": 4}]})", "a.json");
  EXPECT_EQ(j["c"][1]["x"], 4);
}

TEST(ParseJsonText, SyntaxErrorNamesLineAndColumn) {
  const std::string e = error_of([] { parse_json_text("{\n  \"a\": 1,,\n}", "m.json"); });
  EXPECT_EQ(e.rfind("m.json:2:10: malformed JSON (parse error", 0), 0u) << e;
}

TEST_F(InputFileTest, ReadJsonFileAppliesTheFileAndTheJsonChecks) {
  EXPECT_EQ(error_of([&] { read_json_file(dir_.string()); }),
            dir_.string() + ": is a directory, not a file");
  const std::string p = write("d.json", R"({"a": 1, "a": 2})");
  EXPECT_EQ(error_of([&] { read_json_file(p); }),
            p + ": field 'a': duplicate key (a JSON object names each field once)");
  const std::string n = write("n.json", std::string("{}\0{}", 5));
  EXPECT_EQ(error_of([&] { read_json_file(n); }),
            n + ":1:3: contains a NUL byte (byte offset 2); input files must be text");
}

}  // namespace
}  // namespace jaxpp
