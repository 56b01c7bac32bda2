// The self-contained page: one HTML file with its script, style and data inline, so it
// opens from disk, offline, and makes no network request.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ember::memviz {

// The page's parts, embedded at build time from tools/ember-memviz/page/.
extern const char* const kPageTemplate;  // memviz.html, with /*EMBER_MEMVIZ_...*/ slots
extern const char* const kPageScript;    // memviz.js
extern const char* const kPageStyle;     // memviz.css

/// The page for `view` (build_view's result, plus "source": the snapshot's file name).
std::string render_page(const nlohmann::json& view);

}  // namespace ember::memviz
