// Saving the current framebuffer as a PNG (TOOLCHAIN.md: glReadPixels of the back buffer before
// the swap, rows flipped on write, stb_image_write).
#pragma once

#include <string>

namespace gui_app {

// Reads the back buffer (width x height, RGB) and writes `path`. Call after rendering and before
// glfwSwapBuffers. Returns an empty string, or the error.
std::string save_back_buffer_png(const std::string& path, int width, int height);

}  // namespace gui_app
