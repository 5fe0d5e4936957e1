// Reading the files a user names on the command line.
//
// Every input file (model, cluster, schedule JSON/CSV, stage times, trace, plan, corpus) is read
// through read_input_text, which guarantees three things before any parser sees a byte:
//   - the path is a regular file (following symlinks): a directory, a FIFO, a socket or a device
//     such as /dev/zero is refused without being read, so nothing blocks or reads forever;
//   - the file is at most `max_bytes` long (kMaxInputFileBytes, 256 MiB, unless the caller says
//     less), checked on the size the file reports and again while reading, in case it grows;
//   - the text holds no NUL byte: every input is text, and parsers that treat NUL as the end of
//     their input would otherwise silently ignore what follows it;
//   - the text is valid UTF-8 (no stray byte, overlong form, surrogate or code point above
//     U+10FFFF): a CSV cell of Latin-1 bytes otherwise reached nlohmann's dump, which throws a
//     type_error that is no InputError, when a message or a JSON report quoted it.
// Errors are InputError, one line naming the path and what was found there:
//   deep/: is a directory, not a file
//   pipe: is not a regular file (a FIFO)
//   huge.json: is 12 GiB, the limit is 256 MiB
//   plan.json:3:7: contains a NUL byte (byte offset 41); input files must be text
//   c.csv:2:9: is not valid UTF-8 (byte 0xe9 at byte offset 130); input files must be UTF-8 text
// Usage:
//   const std::string text = read_input_text(path);          // JSON or CSV text
//   if (!path_exists(name)) ...; check_input_file(name);     // presets vs paths
#pragma once

#include <cstdint>
#include <string>

#include "graph/limits.h"

namespace jaxpp {

// The whole file as text; InputError as described above.
std::string read_input_text(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);

// The checks of read_input_text that need no reading: a regular file of at most `max_bytes`.
void check_input_file(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);

// The UTF-8 check of read_input_text, for text that did not come through it (`name` names it).
void check_utf8(const std::string& name, const std::string& text);

// True when `text` holds a control character (below 0x20, or 0x7f): what a name printed on one
// line or written into a generated file may not hold.
bool has_control_character(const std::string& text);

// `text` with each byte that starts no valid UTF-8 sequence replaced by '?' (a name taken from a
// path, which may hold any bytes, before it is printed or written into JSON).
std::string with_invalid_utf8_replaced(std::string text);

// True when something (of any kind, even a dangling symlink) is at `path`: a command-line value
// that names neither a preset nor an existing path is reported as both.
bool path_exists(const std::string& path);

// Sizes in messages: "12 GiB", "256 MiB", "300.5 MiB (315097088 bytes)", "4096 bytes".
std::string format_file_size(int64_t bytes);

}  // namespace jaxpp
