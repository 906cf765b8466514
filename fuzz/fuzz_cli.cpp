// libFuzzer target: the actsim command line, parsed and run in process. The input is an argument
// vector, one argument per line (at most 24 of 200 bytes). Properties: no crash, no UB, no hang;
// bad input is a usage error or a sim::ConfigError, never another exception.
//
// Containment: every output goes to FILE in a private temporary folder (-o is overridden), stdout
// is /dev/null, model and device files are names resolved through ACTSIM_MODELS (a path is
// replaced by a shipped name), merge reads only files of that folder, a sweep runs only when it
// has at most 64 points, and --jobs is at most 2.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "app.hpp"
#include "axes.hpp"
#include "sim/error.hpp"
#include "sweep.hpp"

namespace {

std::string g_dir;  // the private temporary folder

// A file name inside g_dir made of the argument's safe characters.
std::string contained(std::string_view name) {
  std::string base;
  for (char c : name)
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-') base += c;
  if (base.empty() || base.front() == '.') base = "out" + base;
  return g_dir + "/" + base.substr(0, 32);
}

// Names only: "./x.json", "/dev/zero" or "a/b" would read files outside the fuzzer's reach.
void names_only(std::string& list, const char* fallback) {
  if (list.find('/') != std::string::npos || list.find(".json") != std::string::npos)
    list = fallback;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/actsim-fuzz-cli-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) std::abort();
  g_dir = templ;
  const int null = open("/dev/null", O_WRONLY);
  if (null < 0 || dup2(null, STDOUT_FILENO) < 0) std::abort();
  close(null);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"actsim"};
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty() && args.size() <= 24) {
    const size_t nl = rest.find('\n');
    args.emplace_back(rest.substr(0, std::min<size_t>(nl, 200)));
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  const actsim_cli::Parsed parsed = actsim_cli::parse_command_line(args);
  if (!parsed.invocation) {
    if (parsed.exit_code != 0 && parsed.exit_code != 2) __builtin_trap();
    if (parsed.exit_code == 2 && parsed.message.empty()) __builtin_trap();
    return 0;
  }
  actsim_cli::Invocation inv = *parsed.invocation;
  inv.flags.output = contained(inv.flags.output.empty() ? "out.txt" : inv.flags.output);
  for (std::string& part : inv.parts) part = contained(part);
  names_only(inv.flags.model, "gpt2-small");
  names_only(inv.flags.device, "h100-sxm");
  inv.jobs = std::clamp(inv.jobs, 1, 2);
  try {
    const cli_common::Axes axes = cli_common::parse_axes(inv.flags);
    if (cli_common::point_count(axes) > 64) return 0;
    // Long sequences on big models take seconds per point: keep each run short.
    for (int64_t s : axes.seqs)
      if (s > 16384) return 0;
    for (int64_t b : axes.batches)
      if (b > 4096) return 0;
    (void)actsim_cli::run_invocation(inv);
  } catch (const sim::ConfigError&) {
  }
  return 0;
}
