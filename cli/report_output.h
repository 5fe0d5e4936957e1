// Output files of the commands: checked before any work, written all or none at the end.
//
// Every command that writes files follows one contract (issue 16, class 6):
//   * each output path is checked before the work starts: not a directory, a symbolic link, a
//     device, FIFO or socket; its directory exists and is writable;
//   * no output is one of the command's input files (std::filesystem::equivalent when both exist,
//     the same normalised path otherwise), and no two outputs are the same file;
//   * "-" is standard output, for every output flag: text formats only, at most one output, and
//     then the command's own report goes to stderr (and --json, which needs stdout, is refused);
//   * the bytes of every output are produced in memory, and written at the end: every file to a
//     temporary next to it first, then all renamed into place, so a failure leaves no file.
//
// Usage:
//   OutputFiles out("simulate");
//   out.input(model_path, "--model");          // files the command reads (names that are not
//                                              // files, such as presets, are ignored)
//   out.output(trace_path, "--trace");         // InputError now when the path is unusable
//   ... work ...
//   out.set("--trace", trace_bytes);
//   out.write_all();                           // all files, then "-" on stdout
//   std::ostream& report = out.report_stream(); // std::cout, or std::cerr when "-" is an output
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace jaxpp::cli {

// InputError "<flag> <path>: ..." when `path` cannot be a file output: empty, a directory, a
// symbolic link, an existing file that is not a regular file (a device, FIFO or socket), or its
// directory does not exist or is not writable. "-" (stdout) is not accepted here: use OutputFiles.
void check_output_path(const std::string& path, const std::string& flag);

// True when `a` and `b` name the same file: equivalent when both exist, else the same path once
// made absolute and normalised.
bool same_file(const std::string& a, const std::string& b);

class OutputFiles {
 public:
  explicit OutputFiles(std::string command) : command_(std::move(command)) {}

  // A file the command reads; a name that is not an existing file (a preset) is ignored. Checked
  // against every output declared before or after.
  void input(const std::string& path, const std::string& flag);
  // An output: checked now (check_output_path, or "-" for stdout unless `binary`) and against
  // the inputs and the other outputs.
  void output(const std::string& path, const std::string& flag, bool binary = false);
  // The bytes of the output declared with `flag`.
  void set(const std::string& flag, std::string bytes);
  bool has(const std::string& flag) const;
  // Writes every output whose bytes were set: all files (temporaries, then renames), then stdout.
  // InputError naming the path when a file cannot be written; no output file is left then.
  void write_all();

  bool to_stdout() const;               // an output is "-"
  std::ostream& report_stream() const;  // std::cerr when to_stdout(), else std::cout
  // InputError when --json was given and an output is "-" (both need stdout).
  void check_json_flag(bool json) const;
  // "wrote <path>" lines for the files written (not stdout), for the report.
  std::vector<std::string> written_files() const;

 private:
  struct Entry {
    std::string path;
    std::string flag;
    std::string bytes;
    bool has_bytes = false;
  };
  std::string command_;
  std::vector<Entry> inputs_;
  std::vector<Entry> outputs_;
};

}  // namespace jaxpp::cli
