#include "cli/report_output.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "graph/error.h"
#include "graph/input_file.h"

namespace jaxpp::cli {
namespace {

namespace fs = std::filesystem;

std::string normalised(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  return p.string();
}

// Removes the temporaries written so far (best effort).
void remove_all(const std::vector<std::string>& paths) {
  std::error_code ec;
  for (const std::string& p : paths) fs::remove(p, ec);
}

}  // namespace

void check_output_path(const std::string& path, const std::string& flag) {
  const std::string where = flag + " " + path;
  std::error_code ec;
  if (path.empty()) throw_input_error(flag, "expected a file name");
  if (has_control_character(path))  // "wrote <path>" lines and hand-offs that name the file
    throw_input_error(flag, "the file name contains a control character, got " +
                                nlohmann::json(path).dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace));
  const fs::file_status link = fs::symlink_status(path, ec);
  if (fs::is_symlink(link))
    throw_input_error(where,
                      "is a symbolic link; refusing to replace it (give the file it points "
                      "to, or another name)");
  if (fs::is_directory(link)) throw_input_error(where, "is a directory");
  if (fs::exists(link) && !fs::is_regular_file(link))
    throw_input_error(where,
                      "is not a regular file (a device, FIFO or socket); refusing to "
                      "write there");
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec))
    throw_input_error(where, "directory '" + parent.string() + "' does not exist");
  if (access(parent.c_str(), W_OK) != 0)
    throw_input_error(where, "directory '" + parent.string() + "' is not writable");
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool eq = fs::equivalent(a, b, ec);
    if (!ec) return eq;
  }
  return normalised(a) == normalised(b);
}

void OutputFiles::input(const std::string& path, const std::string& flag) {
  std::error_code ec;
  if (path.empty() || path == "-" || !fs::exists(path, ec)) return;  // a preset name, not a file
  for (const Entry& o : outputs_) {
    if (o.path != "-" && same_file(o.path, path))
      throw_input_error(o.flag + " " + o.path,
                        "is also the input " + flag + "; refusing to overwrite an input");
  }
  inputs_.push_back({path, flag, "", false});
}

void OutputFiles::output(const std::string& path, const std::string& flag, bool binary) {
  if (path == "-") {
    if (binary)
      throw_input_error(flag, "cannot write a binary format to stdout ('-'); give a file name");
    for (const Entry& o : outputs_) {
      if (o.path == "-")
        throw_input_error(flag + " -", "stdout is already the output of " + o.flag +
                                           " (at most one output may be '-')");
    }
  } else {
    check_output_path(path, flag);
    for (const Entry& i : inputs_) {
      if (same_file(path, i.path))
        throw_input_error(flag + " " + path,
                          "is also the input " + i.flag + "; refusing to overwrite an input");
    }
    for (const Entry& o : outputs_) {
      if (o.path != "-" && same_file(path, o.path))
        throw_input_error(flag + " " + path,
                          "is also the output of " + o.flag + " (two outputs cannot share a file)");
    }
  }
  outputs_.push_back({path, flag, "", false});
}

void OutputFiles::set(const std::string& flag, std::string bytes) {
  for (Entry& o : outputs_) {
    if (o.flag == flag) {
      o.bytes = std::move(bytes);
      o.has_bytes = true;
      return;
    }
  }
}

bool OutputFiles::has(const std::string& flag) const {
  for (const Entry& o : outputs_)
    if (o.flag == flag) return true;
  return false;
}

void OutputFiles::write_all() {
  // Temporaries next to their targets (the rename stays on one file system), all written before
  // any target is replaced.
  std::vector<std::string> temporaries;
  std::vector<const Entry*> files;
  for (const Entry& o : outputs_) {
    if (!o.has_bytes || o.path == "-") continue;
    const std::string tmp = o.path + ".tmp." + std::to_string(::getpid());
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) temporaries.push_back(tmp);
    if (out) out << o.bytes;
    if (out) out.flush();
    if (!out) {
      const std::string why = std::strerror(errno);
      remove_all(temporaries);
      throw_input_error(o.flag + " " + o.path, "cannot write: " + why);
    }
    files.push_back(&o);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    fs::rename(temporaries[i], files[i]->path, ec);
    if (ec) {
      remove_all(std::vector<std::string>(temporaries.begin() + i, temporaries.end()));
      throw_input_error(files[i]->flag + " " + files[i]->path, "cannot write: " + ec.message());
    }
  }
  for (const Entry& o : outputs_) {
    if (o.has_bytes && o.path == "-") std::cout << o.bytes << std::flush;
  }
}

bool OutputFiles::to_stdout() const {
  for (const Entry& o : outputs_)
    if (o.path == "-") return true;
  return false;
}

std::ostream& OutputFiles::report_stream() const { return to_stdout() ? std::cerr : std::cout; }

void OutputFiles::check_json_flag(bool json) const {
  if (!json) return;
  for (const Entry& o : outputs_) {
    if (o.path == "-")
      throw_input_error(
          "--json", "cannot share stdout with " + o.flag + " -; give " + o.flag + " a file name");
  }
}

std::vector<std::string> OutputFiles::written_files() const {
  std::vector<std::string> paths;
  for (const Entry& o : outputs_)
    if (o.has_bytes && o.path != "-") paths.push_back(o.path);
  return paths;
}

}  // namespace jaxpp::cli
