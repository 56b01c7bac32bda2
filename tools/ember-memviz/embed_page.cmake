# Writes the page template, its script and its style into one C++ source as raw strings:
#   cmake -DPAGE_DIR=<dir> -DOUTPUT=<file.cpp> -P embed_page.cmake
foreach(part html js css)
  file(READ ${PAGE_DIR}/memviz.${part} content)
  string(FIND "${content}" ")memviz_page\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "memviz.${part} contains the raw-string delimiter")
  endif()
  set(text_${part} "${content}")
endforeach()
file(WRITE ${OUTPUT}.tmp "// Generated from tools/ember-memviz/page by embed_page.cmake; do not edit.
#include \"page.h\"

namespace ember::memviz {
const char* const kPageTemplate = R\"memviz_page(${text_html})memviz_page\";
const char* const kPageScript = R\"memviz_page(${text_js})memviz_page\";
const char* const kPageStyle = R\"memviz_page(${text_css})memviz_page\";
}  // namespace ember::memviz
")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
