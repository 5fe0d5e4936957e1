// Text Gantt chart of a Trace for the terminal: one row per actor, `width` columns of equal time.
//
//   0 .. 12 ms, 60 columns of 200 us
//   actor 0 |FFFF-FFFF..BBBBBBBB..BBBBBBBBO|
//   actor 1 |....FFFF-FFFFBBBBBBBB..BBBBBBBO|
//           +---------+---------+---------+
//           0         2 ms      4 ms      6 ms
//   F forward  B backward  I backward-input  W backward-weight  - send/recv  A allreduce
//   O optimizer  . idle
// A cell shows the category (category_char) that covers most of the cell's time on the actor's
// compute stream; when the compute stream is idle there, the communication/collective streams
// fill it; '.' means nothing ran. Ties go to the earlier category in kAllEventCategories.
// With per_stream, each (actor, stream) gets its own row. Deterministic; golden-testable.
//
// Usage:
//   std::cout << text_gantt(trace, {.width = 100});
#pragma once

#include <string>

#include "trace/trace.h"

namespace jaxpp {

struct GanttOptions {
  int width = 100;  // columns of the time axis (>= 10)
  bool per_stream = false;
};

std::string text_gantt(const Trace& trace, const GanttOptions& options);

}  // namespace jaxpp
