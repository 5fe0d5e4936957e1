#include "trace/graphviz_render.h"

#include <gvc.h>

#include <memory>
#include <mutex>

#include "graph/error.h"

namespace jaxpp {
namespace {

std::mutex& gvc_mutex() {
  static std::mutex m;
  return m;
}

struct GvcDeleter {
  void operator()(GVC_t* gvc) const { gvFreeContext(gvc); }
};

}  // namespace

std::string render_dot(const std::string& dot, std::string_view format, std::string_view engine) {
  std::lock_guard<std::mutex> lock(gvc_mutex());
  agseterr(AGMAX);  // keep libgvc quiet on stderr; failures become InputError below
  std::unique_ptr<GVC_t, GvcDeleter> gvc(gvContext());
  if (!gvc) throw_input_error("graphviz", "cannot create a libgvc context");
  Agraph_t* graph = agmemread(dot.c_str());
  if (graph == nullptr) throw_input_error("graphviz", "the DOT text does not parse");
  const std::string engine_str(engine);
  const std::string format_str(format);
  if (gvLayout(gvc.get(), graph, engine_str.c_str()) != 0) {
    agclose(graph);
    throw_input_error("graphviz", "layout engine '" + engine_str + "' failed or is not available");
  }
  char* data = nullptr;
  unsigned int length = 0;
  const int rc = gvRenderData(gvc.get(), graph, format_str.c_str(), &data, &length);
  std::string result;
  if (rc == 0 && data != nullptr) result.assign(data, length);
  gvFreeRenderData(data);
  gvFreeLayout(gvc.get(), graph);
  agclose(graph);
  if (rc != 0 || result.empty()) {
    throw_input_error("graphviz", "cannot render format '" + format_str +
                                      "' (is the libgvc plugin installed?)");
  }
  return result;
}

}  // namespace jaxpp
