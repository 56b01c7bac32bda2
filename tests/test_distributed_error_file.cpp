// The error file a rank writes when it dies of an uncaught exception (Note [Error file],
// issue 34 item 16): whatever the bytes of the exception's message, the file is JSON that
// torchrun's agent can read (it reads it as UTF-8 text, and died with UnicodeDecodeError
// on a raw Latin-1 byte), and no byte of the message is lost.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST(ErrorFile, AMessageThatIsNotUtf8IsWrittenAsAsciiJsonKeepingEveryByte) {
  char templ[] = "/tmp/ember_error_file_XXXXXX";
  ASSERT_NE(::mkdtemp(templ), nullptr);
  const std::filesystem::path dir = templ, file = dir / "error.json";
  std::string command =
      "TORCHELASTIC_ERROR_FILE=" + file.string() + " " + EMBER_RUN_PROBE_PATH + " throw-bytes >/dev/null 2>&1";
  EXPECT_NE(std::system(command.c_str()), 0);  // it aborts
  const std::string text = read_file(file);
  ASSERT_FALSE(text.empty());
  for (unsigned char c : text) EXPECT_LT(c, 0x80) << "a byte past ASCII in " << text;
  nlohmann::json json;
  ASSERT_NO_THROW(json = nlohmann::json::parse(text)) << text;
  // UTF-8 characters as themselves, each other byte as the character of its Latin-1 reading.
  const std::string want = "ValueError: probe: f\u00fcr caf\u00e9 \u20ac \"q\" \x01 end\u00e2\u0082";
  EXPECT_EQ(json["message"]["message"], want);
  EXPECT_EQ(json["message"]["extraInfo"]["py_callstack"].get<std::string>().rfind(want, 0), 0u);
  // As torchrun's agent reads it (json.load of the file opened as text), when PyTorch's
  // Python is here.
  if (std::system("/usr/bin/python3 -c 'import json' >/dev/null 2>&1") == 0) {
    std::string check =
        "/usr/bin/python3 -c 'import json,sys; m = json.load(open(sys.argv[1]))[\"message\"][\"message\"]; "
        "sys.exit(m != \"ValueError: probe: f\\u00fcr caf\\u00e9 \\u20ac \\\"q\\\" \\x01 end\\u00e2\\x82\")' " +
        file.string();
    EXPECT_EQ(std::system(check.c_str()), 0) << check;
  }
  std::filesystem::remove_all(dir);
}
