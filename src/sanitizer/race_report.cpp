// The text of a race report, as PyTorch's CSAN words it (UnsynchronizedAccessError).
#include <sstream>

#include "sanitizer/sanitizing_backend.h"

namespace ember::detail::sanitizer {

namespace {

void describe_stream(std::ostream& out, const StreamDescription& stream, Backend& upstream) {
  if (stream.is_host) {
    out << "the host";
    return;
  }
  out << "stream " << stream.number;
  bool is_default = stream.is_default;
  if (!is_default && stream.device >= 0) {
    try {
      is_default = reinterpret_cast<StreamKey>(upstream.default_stream(stream.device)) == stream.key;
    } catch (...) {
    }
  }
  if (is_default) out << " (default)";
  if (stream.device >= 0) out << " on cuda:" << stream.device;
}

void describe_access(std::ostream& out, const AccessRecord& access) {
  out << access.op << "\n"
      << (access.type == AccessType::Write ? "writing to" : "reading from") << " argument: " << access.argument;
  if (access.index >= 0) out << " " << access.index;
  out << "\nWith stack trace:\n" << (access.stack ? access.stack->str() : std::string());
}

}  // namespace

std::string format_races(const std::vector<DataRace>& races, Backend& upstream) {
  std::ostringstream out;
  for (size_t i = 0; i < races.size(); ++i) {
    const DataRace& race = races[i];
    if (i > 0) out << "============================\n";
    out << "CSAN detected a possible data race on tensor with data pointer 0x" << std::hex << race.pointer << std::dec
        << "\nAccess by ";
    describe_stream(out, race.current_stream, upstream);
    out << " during kernel:\n";
    describe_access(out, race.current);
    out << "\nPrevious access by ";
    describe_stream(out, race.previous_stream, upstream);
    out << " during kernel:\n";
    describe_access(out, race.previous);
  }
  return out.str();
}

}  // namespace ember::detail::sanitizer
