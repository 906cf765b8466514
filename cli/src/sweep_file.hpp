// Reading back the CSV files a sweep writes: where an interrupted sweep's FILE.partial resumes
// (sweep --resume), and joining the parts of a sharded sweep (actsim merge).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sweep.hpp"

namespace actsim_cli {

// Reads a CSV file record by record (RFC 4180: a newline inside quotes is part of the field).
class CsvRecords {
 public:
  // Throws sim::ConfigError(flag, path, ...) when the file cannot be opened.
  CsvRecords(const std::string& path, std::string_view flag);
  CsvRecords(const CsvRecords&) = delete;
  CsvRecords& operator=(const CsvRecords&) = delete;
  ~CsvRecords();

  // The next record with its line ending; false at the end of the file. A last record without
  // '\n' (a file cut short) is returned without one: callers check `complete()`.
  bool next(std::string& record);
  static bool complete(const std::string& record) {
    return !record.empty() && record.back() == '\n';
  }
  uint64_t offset() const { return offset_; }  // bytes consumed so far

 private:
  bool fill();
  std::FILE* file_ = nullptr;
  std::vector<char> buf_;
  std::size_t pos_ = 0;
  std::size_t len_ = 0;
  uint64_t offset_ = 0;
};

// The row_index column (the third) of a CSV row of schema v1; nullopt when it is not a number.
std::optional<int64_t> row_index_of(std::string_view record);
// The row's key columns (schema_version through allocator) as written, quotes included.
std::string_view key_columns(std::string_view record);

// Where sweep --resume continues: the next row to compute and the bytes of FILE.partial to keep
// (its header and every whole row). nullopt when there is no FILE.partial (start afresh).
// Throws ConfigError("--resume", partial, ...) when the file is not a prefix of this sweep's
// rows [range.first, range.end): another header, other key columns, a gap in row_index.
struct ResumePoint {
  int64_t next_row = 0;
  uint64_t keep_bytes = 0;
};
std::optional<ResumePoint> find_resume_point(const std::string& output,
                                             const cli_common::Axes& axes,
                                             const cli_common::Inputs& inputs,
                                             cli_common::RowRange range);

// Checks that `parts` are CSV files of one header whose rows, in the order of their first
// row_index, run 0, 1, 2, ... without gap or overlap (and to rows - 1 when `rows` is given), and
// passes the header and then every row to `write` (only once every check passed: the parts are
// read twice). Throws ConfigError naming the file and row. Returns the number of rows.
int64_t merge_parts(const std::vector<std::string>& parts, std::optional<int64_t> rows,
                    const std::function<void(std::string_view)>& write);

}  // namespace actsim_cli
