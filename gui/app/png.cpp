#include "png.hpp"

#include <vector>

#include <GL/gl.h>
#include <stb_image_write.h>  // implemented inside libstb: no STB_IMAGE_WRITE_IMPLEMENTATION

namespace gui_app {

std::string save_back_buffer_png(const std::string& path, int width, int height) {
  if (width <= 0 || height <= 0) return "empty framebuffer";
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, pixels.data());
  if (glGetError() != GL_NO_ERROR) return "glReadPixels failed";
  // OpenGL's rows run bottom to top; PNG's top to bottom.
  stbi_flip_vertically_on_write(1);
  if (!stbi_write_png(path.c_str(), width, height, 3, pixels.data(), width * 3))
    return path + ": cannot write the PNG";
  return {};
}

}  // namespace gui_app
