#include "export.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace gui {

std::string write_file(const std::string& path, const std::string& text) {
  if (path.empty()) return "no file name";
  const std::string partial = path + ".partial";
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (!f) return path + ": " + std::strerror(errno);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  std::error_code ec;
  if (!ok || !closed) {
    std::filesystem::remove(partial, ec);
    return path + ": write failed";
  }
  std::filesystem::rename(partial, path, ec);
  if (ec) {
    std::filesystem::remove(partial, ec);
    return path + ": " + ec.message();
  }
  return {};
}

}  // namespace gui
