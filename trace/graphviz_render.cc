#include "trace/graphviz_render.h"

#include <gvc.h>

#include <mutex>

#include "graph/error.h"

namespace jaxpp {
namespace {

std::mutex& gvc_mutex() {
  static std::mutex m;
  return m;
}

// One libgvc context for the whole process, never freed. libgvc's pango plugin keeps a static
// pointer to the last font name it measured, and that string belongs to the context: rendering
// with a second context after freeing the first one reads freed memory (graphviz 2.42, found by
// AddressSanitizer). Use under gvc_mutex().
GVC_t* process_gvc() {
  static GVC_t* const gvc = gvContext();
  return gvc;
}

}  // namespace

std::string render_dot(const std::string& dot, std::string_view format, std::string_view engine) {
  std::lock_guard<std::mutex> lock(gvc_mutex());
  agseterr(AGMAX);  // keep libgvc quiet on stderr; failures become InputError below
  GVC_t* const gvc = process_gvc();
  if (gvc == nullptr) throw_input_error("graphviz", "cannot create a libgvc context");
  Agraph_t* graph = agmemread(dot.c_str());
  if (graph == nullptr) throw_input_error("graphviz", "the DOT text does not parse");
  const std::string engine_str(engine);
  const std::string format_str(format);
  if (gvLayout(gvc, graph, engine_str.c_str()) != 0) {
    agclose(graph);
    throw_input_error("graphviz", "layout engine '" + engine_str + "' failed or is not available");
  }
  char* data = nullptr;
  unsigned int length = 0;
  const int rc = gvRenderData(gvc, graph, format_str.c_str(), &data, &length);
  std::string result;
  if (rc == 0 && data != nullptr) result.assign(data, length);
  gvFreeRenderData(data);
  gvFreeLayout(gvc, graph);
  agclose(graph);
  if (rc != 0 || result.empty()) {
    throw_input_error("graphviz", "cannot render format '" + format_str +
                                      "' (is the libgvc plugin installed?)");
  }
  return result;
}

}  // namespace jaxpp
