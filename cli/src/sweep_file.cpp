#include "sweep_file.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include "sim/error.hpp"
#include "sim_io/output.hpp"

namespace actsim_cli {
namespace {

constexpr std::size_t kChunk = 1 << 20;
constexpr int kKeyColumns = 18;  // schema_version .. allocator (sim_io csv.cpp)

// The end of field `n` (0-based) of a record: the offset of the comma after it, or of the line
// end. Quote-aware; npos when the record has fewer fields.
std::size_t field_end(std::string_view record, int n) {
  bool quoted = false;
  int field = 0;
  for (std::size_t i = 0; i < record.size(); ++i) {
    const char c = record[i];
    if (c == '"') {
      quoted = !quoted;
    } else if (!quoted && (c == ',' || c == '\n' || c == '\r')) {
      if (field == n) return i;
      if (c != ',') return std::string_view::npos;
      ++field;
    }
  }
  return field == n ? record.size() : std::string_view::npos;
}

std::string row_label(int64_t index) { return "row_index " + std::to_string(index); }

}  // namespace

CsvRecords::CsvRecords(const std::string& path, std::string_view flag) : buf_(kChunk) {
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr)
    throw sim::ConfigError(std::string(flag), path, std::string("cannot read: ") + std::strerror(errno));
}

CsvRecords::~CsvRecords() {
  if (file_ != nullptr) std::fclose(file_);
}

bool CsvRecords::fill() {
  pos_ = 0;
  len_ = std::fread(buf_.data(), 1, buf_.size(), file_);
  return len_ > 0;
}

bool CsvRecords::next(std::string& record) {
  record.clear();
  bool quoted = false;
  for (;;) {
    if (pos_ == len_ && !fill()) return !record.empty();
    const char* begin = buf_.data() + pos_;
    const char* end = buf_.data() + len_;
    const char* p = begin;
    for (; p != end; ++p) {
      if (*p == '"') quoted = !quoted;
      if (*p == '\n' && !quoted) {
        ++p;
        record.append(begin, p);
        pos_ += static_cast<std::size_t>(p - begin);
        offset_ += static_cast<uint64_t>(p - begin);
        return true;
      }
    }
    record.append(begin, end);
    offset_ += static_cast<uint64_t>(end - begin);
    pos_ = len_;
  }
}

std::optional<int64_t> row_index_of(std::string_view record) {
  const std::size_t start = field_end(record, 1);
  const std::size_t stop = field_end(record, 2);
  if (start == std::string_view::npos || stop == std::string_view::npos) return std::nullopt;
  const std::string_view digits = record.substr(start + 1, stop - start - 1);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || v < 0)
    return std::nullopt;
  return v;
}

std::string_view key_columns(std::string_view record) {
  const std::size_t stop = field_end(record, kKeyColumns - 1);
  return stop == std::string_view::npos ? std::string_view() : record.substr(0, stop);
}

std::optional<ResumePoint> find_resume_point(const std::string& output,
                                             const cli_common::Axes& axes,
                                             const cli_common::Inputs& inputs,
                                             cli_common::RowRange range) {
  const std::string partial = output + ".partial";
  std::error_code ec;
  if (!std::filesystem::exists(partial, ec)) return std::nullopt;
  const auto refuse = [&](const std::string& why) {
    return sim::ConfigError("--resume", partial, why + "; not resuming (remove it to start over)");
  };

  CsvRecords in(partial, "--resume");
  std::string record;
  ResumePoint point{range.first, 0};
  if (!in.next(record) || !CsvRecords::complete(record)) {
    return point;  // interrupted before its header was whole: start afresh
  }
  if (record != sim_io::csv_header()) throw refuse("its header is not this actsim's CSV schema v1 header");
  point.keep_bytes = in.offset();

  // The expected key columns of row `index`, as the sweep writes them.
  const auto expected_key = [&](int64_t index) {
    sim_io::Row row;
    row.row_index = index;
    row.key = cli_common::row_key(axes, inputs, cli_common::point_at(axes, index));
    return std::string(key_columns(sim_io::csv_row(row)));
  };
  std::string last;
  while (in.next(record) && CsvRecords::complete(record)) {
    const std::optional<int64_t> index = row_index_of(record);
    if (!index || *index != point.next_row)
      throw refuse("row " + std::to_string(point.next_row - range.first + 1) +
                   " should have " + row_label(point.next_row) + " of this sweep");
    if (*index >= range.end) throw refuse("it has more rows than this sweep");
    // The first row's key is checked; later ones by their index, and the last by its key.
    if (*index == range.first && key_columns(record) != expected_key(*index))
      throw refuse(row_label(*index) + " has other key columns than this sweep's (other flags?)");
    ++point.next_row;
    point.keep_bytes = in.offset();
    last = std::move(record);
  }
  if (point.next_row > range.first && key_columns(last) != expected_key(point.next_row - 1))
    throw refuse(row_label(point.next_row - 1) +
                 " has other key columns than this sweep's (other flags?)");
  return point;
}

int64_t merge_parts(const std::vector<std::string>& parts, std::optional<int64_t> rows,
                    const std::function<void(std::string_view)>& write) {
  if (parts.empty()) throw sim::ConfigError("merge", "parts", "no files to merge");
  // Each part's header and first row_index, to order them.
  struct Part {
    std::string path;
    int64_t first = -1;  // -1: no rows
  };
  std::vector<Part> order;
  std::string header;
  std::string record;
  for (const std::string& path : parts) {
    CsvRecords in(path, "merge");
    if (!in.next(record) || !CsvRecords::complete(record) || record.rfind("schema_version,", 0) != 0)
      throw sim::ConfigError("merge", path, "not a sweep's CSV file (no schema header line)");
    if (header.empty()) {
      header = record;
    } else if (record != header) {
      throw sim::ConfigError("merge", path, "its header differs from " + parts.front() + "'s");
    }
    Part part{path, -1};
    if (in.next(record)) {
      const std::optional<int64_t> index = row_index_of(record);
      if (!index) throw sim::ConfigError("merge", path, "row 1 has no row_index");
      part.first = *index;
    }
    order.push_back(std::move(part));
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Part& a, const Part& b) { return a.first < b.first; });

  // Two passes: every check first, so that nothing is written (not even to stdout) for parts
  // that cannot be merged; then the copy.
  const auto pass = [&](bool copy) {
    if (copy) write(header);
    int64_t next = 0;
    std::string previous = "the start";
    for (const Part& part : order) {
      if (part.first < 0) continue;  // an empty shard (more shards than rows)
      if (part.first > next)
        throw sim::ConfigError("merge", part.path,
                               "gap: it starts at " + row_label(part.first) + " but " + previous +
                                   " ends before " + row_label(next));
      if (part.first < next)
        throw sim::ConfigError("merge", part.path,
                               "overlap: it starts at " + row_label(part.first) + " but " +
                                   previous + " already has rows up to " + row_label(next - 1));
      CsvRecords in(part.path, "merge");
      in.next(record);  // the header, checked above
      int64_t line = 1;
      while (in.next(record)) {
        ++line;
        if (!CsvRecords::complete(record))
          throw sim::ConfigError("merge", part.path,
                                 "line " + std::to_string(line) +
                                     " is cut short (an unfinished part?)");
        const std::optional<int64_t> index = row_index_of(record);
        if (!index || *index != next)
          throw sim::ConfigError("merge", part.path,
                                 "line " + std::to_string(line) + " should have " + row_label(next));
        if (copy) write(record);
        ++next;
      }
      previous = part.path;
    }
    if (rows && next != *rows)
      throw sim::ConfigError("--rows", std::to_string(*rows),
                             "the parts hold " + std::to_string(next) + " rows (a part missing?)");
    return next;
  };
  pass(false);
  return pass(true);
}

}  // namespace actsim_cli
