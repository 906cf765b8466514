// actsim merge: the parts of a sharded sweep (sweep --shard i/N) joined into the file the
// unsharded sweep writes, byte for byte. The parts may come in any order; a gap, an overlap, a
// different header or a row cut short is exit 2 with no output file.
#include <fmt/format.h>

#include <unistd.h>

#include "commands.hpp"
#include "format.hpp"
#include "sweep_file.hpp"

namespace actsim_cli {

int cmd_merge(const Invocation& inv) {
  Output out(inv.flags.output);
  const int64_t rows =
      merge_parts(inv.parts, inv.rows, [&out](std::string_view text) { out.write(text); });
  out.commit();
  if (isatty(STDERR_FILENO) != 0 && !inv.flags.output.empty())
    fmt::print(stderr, "{} rows from {} files to {}\n", rows, inv.parts.size(), inv.flags.output);
  return 0;
}

}  // namespace actsim_cli
