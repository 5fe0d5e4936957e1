// Renders Graphviz DOT text to SVG or PNG bytes in-process through libgvc.
//
// libgvc stays behind this one function: nothing else in the project includes a Graphviz header.
// Engines:
//   "nop"    keep the positions already in the DOT text (pos="x,y!", points; like `neato -n`),
//            used for the timeline
//   "dot"    hierarchical layout, used for the task graph
// The result is held in memory, so a caller can write it atomically (no partial output files).
// Calls are serialised by a mutex (libgvc keeps global state).
//
// Usage:
//   std::string svg = render_dot(timeline_to_dot(trace, {}), "svg", "nop");
//   write_text_file_atomic("timeline.svg", svg);
#pragma once

#include <string>
#include <string_view>

namespace jaxpp {

// InputError if the DOT text does not parse, the engine or format is unknown, or the
// layout/rendering fails. `format` is a libgvc output format ("svg", "png", "dot", ...).
std::string render_dot(const std::string& dot, std::string_view format, std::string_view engine);

}  // namespace jaxpp
