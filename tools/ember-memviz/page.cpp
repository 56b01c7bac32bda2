#include "page.h"

#include <stdexcept>
#include <string_view>

namespace ember::memviz {
namespace {

// The view as JSON that is safe inside <script type="application/json">: '<' can only
// occur inside JSON strings, where "\u003c" reads back the same, so neither "</script>"
// nor "<!--" reaches the HTML parser.
std::string script_safe_json(const nlohmann::json& view) {
  const std::string text = view.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

}  // namespace

std::string render_page(const nlohmann::json& view) {
  // Slots are filled from the template alone, so a slot's name inside the script or
  // the data is never expanded.
  const std::string_view page = kPageTemplate;
  const std::pair<std::string_view, std::string> slots[] = {
      {"/*EMBER_MEMVIZ_STYLE*/", kPageStyle},
      {"/*EMBER_MEMVIZ_DATA*/", script_safe_json(view)},
      {"/*EMBER_MEMVIZ_SCRIPT*/", kPageScript},
  };
  std::string out;
  size_t at = 0;
  for (const auto& [slot, content] : slots) {
    const size_t found = page.find(slot, at);
    if (found == std::string_view::npos) throw std::logic_error("page template lacks " + std::string(slot));
    out.append(page.substr(at, found - at));
    out.append(content);
    at = found + slot.size();
  }
  out.append(page.substr(at));
  return out;
}

}  // namespace ember::memviz
