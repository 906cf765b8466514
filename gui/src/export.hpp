// Writing exports to files: the comparison's CSV (compare.hpp) here; the PNG of the current view
// is the front end's (it needs the GL framebuffer): the views only set ViewState::png_requested.
#pragma once

#include <string>

namespace gui {

// Writes `text` to `path` via `path.partial` renamed when complete (as the CLI does), so a
// failed write leaves no half file. Returns an empty string, or the error.
std::string write_file(const std::string& path, const std::string& text);

}  // namespace gui
