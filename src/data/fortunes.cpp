// Fortunes: Debian's fortune cookie files, split into training and validation by file.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ember/char_data.h"
#include "ember/errors.h"

namespace ember::data {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string joined(const std::vector<FortuneFile>& files) {
  std::string out;
  for (const FortuneFile& f : files) out += f.text;
  return out;
}

}  // namespace

FortuneFile read_fortune_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), Error, "Fortunes: cannot open ", path, ": ", std::strerror(errno));
  FortuneFile file;
  file.name = fs::path(path).filename().string();
  std::string line, cookie;
  auto flush = [&] {
    // A cookie of blank lines only is empty: dropped, as fortune's strfile drops it.
    if (cookie.find_first_not_of(" \t\r\n") != std::string::npos) {
      file.text += cookie + "%\n";
      ++file.cookies;
    }
    cookie.clear();
  };
  while (std::getline(in, line)) {
    if (line == "%") flush();
    else cookie += line + "\n";
  }
  EMBER_CHECK(!in.bad(), Error, "Fortunes: error reading ", path);
  flush();
  EMBER_CHECK(file.cookies > 0, ValueError, "Fortunes: ", path, " holds no cookie (the file is empty)");
  return file;
}

Fortunes::Fortunes(const std::string& root, int validation_every) {
  EMBER_CHECK(validation_every >= 0, ValueError, "Fortunes: validation_every must be >= 0, got ", validation_every);
  std::error_code ec;
  EMBER_CHECK(fs::is_directory(root, ec), Error, "Fortunes: ", root,
              " is not a directory (Debian's fortunes package installs the cookies in ", kDefaultRoot, ")");
  std::vector<std::string> paths;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_symlink() || !it->is_regular_file() || name.starts_with(".") || ends_with(name, ".dat") ||
        ends_with(name, ".u8"))
      continue;
    paths.push_back(it->path().string());
  }
  EMBER_CHECK(!ec, Error, "Fortunes: cannot list ", root, ": ", ec.message());
  EMBER_CHECK(!paths.empty(), ValueError, "Fortunes: ", root, " holds no cookie file");
  std::sort(paths.begin(), paths.end());
  for (size_t i = 0; i < paths.size(); ++i) {
    const bool validation =
        validation_every > 0 && i % static_cast<size_t>(validation_every) == static_cast<size_t>(validation_every - 1);
    (validation ? validation_ : train_).push_back(read_fortune_file(paths[i]));
  }
  EMBER_CHECK(!train_.empty() && (validation_every == 0 || !validation_.empty()), ValueError,
              "Fortunes: ", paths.size(), " file(s) in ", root, " cannot be split with validation_every ",
              validation_every, ": one half would be empty");
  vocabulary_ = CharVocabulary(train_text() + validation_text());
}

std::string Fortunes::train_text() const { return joined(train_); }
std::string Fortunes::validation_text() const { return joined(validation_); }

}  // namespace ember::data
