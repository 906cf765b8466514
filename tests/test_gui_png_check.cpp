// gui_png_check FILE MIN_WIDTH MIN_HEIGHT: exit 0 when FILE is a PNG at least that large that is
// not blank (many distinct colours, not one flat fill). Used by the screenshot tests.
#include <cstdio>
#include <cstdlib>
#include <set>

#include <stb_image.h>  // implemented inside libstb

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: gui_png_check FILE MIN_WIDTH MIN_HEIGHT\n");
    return 2;
  }
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load(argv[1], &w, &h, &n, 3);
  if (!px) {
    std::fprintf(stderr, "gui_png_check: %s: not a readable image (%s)\n", argv[1], stbi_failure_reason());
    return 1;
  }
  std::set<unsigned> colours;
  long long lit = 0;  // pixels brighter than the background
  for (long long i = 0; i < static_cast<long long>(w) * h; ++i) {
    const unsigned char* p = px + 3 * i;
    colours.insert((unsigned{p[0]} << 16) | (unsigned{p[1]} << 8) | p[2]);
    lit += p[0] + p[1] + p[2] > 180;
  }
  stbi_image_free(px);
  const int min_w = std::atoi(argv[2]), min_h = std::atoi(argv[3]);
  std::printf("%s: %d x %d, %zu colours, %lld bright pixels\n", argv[1], w, h, colours.size(), lit);
  if (w < min_w || h < min_h) {
    std::fprintf(stderr, "gui_png_check: %s is %d x %d, expected at least %d x %d\n", argv[1], w, h, min_w, min_h);
    return 1;
  }
  // A blank or flat frame has a handful of colours; text, plots and heatmaps have hundreds.
  if (colours.size() < 64 || lit < static_cast<long long>(w) * h / 200) {
    std::fprintf(stderr, "gui_png_check: %s looks blank\n", argv[1]);
    return 1;
  }
  return 0;
}
