#include "loadgen/trace.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace somm::loadgen {
namespace {

enum class Column { kTimestamp, kModel, kTask, kLatencySlo, kMinAccuracy, kMaxCost };

const std::map<std::string, Column, std::less<>>& KnownColumns() {
  static const auto* columns =
      new std::map<std::string, Column, std::less<>>{{"timestamp_ms", Column::kTimestamp},
                                                     {"model", Column::kModel},
                                                     {"task", Column::kTask},
                                                     {"latency_slo_ms", Column::kLatencySlo},
                                                     {"min_accuracy", Column::kMinAccuracy},
                                                     {"max_cost", Column::kMaxCost}};
  return *columns;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> SplitCells(std::string_view line) {
  std::vector<std::string_view> cells;
  size_t from = 0;
  while (true) {
    const size_t comma = line.find(',', from);
    cells.push_back(
        Trim(line.substr(from, comma == std::string_view::npos ? comma : comma - from)));
    if (comma == std::string_view::npos) return cells;
    from = comma + 1;
  }
}

// A finite number filling the whole cell (strtod wants a terminated string).
bool ParseNumber(std::string_view cell, double* out) {
  const std::string text(cell);
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() && std::isfinite(*out);
}

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Status Header(std::string_view line, int line_no) {
    const auto cells = SplitCells(line);
    for (size_t i = 0; i < cells.size(); ++i) {
      const auto it = KnownColumns().find(cells[i]);
      if (it == KnownColumns().end()) {
        return Error(line_no, "header column " + std::to_string(i + 1) + " '" +
                                  std::string(cells[i]) +
                                  "' is not one of timestamp_ms, model, task, latency_slo_ms, "
                                  "min_accuracy, max_cost");
      }
      for (const Column c : columns_) {
        if (c == it->second) {
          return Error(line_no, "header names column '" + std::string(cells[i]) + "' twice");
        }
      }
      columns_.push_back(it->second);
      names_.emplace_back(cells[i]);
    }
    bool has_timestamp = false;
    for (const Column c : columns_) has_timestamp |= c == Column::kTimestamp;
    if (!has_timestamp) return Error(line_no, "header lacks the required column 'timestamp_ms'");
    return Status::Ok();
  }

  StatusOr<TraceQuery> Row(std::string_view line, int line_no) {
    const auto cells = SplitCells(line);
    if (cells.size() != columns_.size()) {
      return Error(line_no, "has " + std::to_string(cells.size()) + " cells, the header has " +
                                std::to_string(columns_.size()) + " columns");
    }
    TraceQuery q;
    q.line = line_no;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string_view cell = cells[i];
      if (cell.find('"') != std::string_view::npos) {
        return CellError(line_no, i, "quoted cells are not supported");
      }
      if (columns_[i] == Column::kModel) {
        q.model = cell;
        continue;
      }
      if (columns_[i] == Column::kTask) {
        q.task = cell;
        continue;
      }
      if (cell.empty()) {
        if (columns_[i] == Column::kTimestamp) return CellError(line_no, i, "is empty");
        continue;
      }
      double value = 0;
      if (!ParseNumber(cell, &value)) {
        return CellError(line_no, i, "'" + std::string(cell) + "' is not a number");
      }
      if (value < 0) return CellError(line_no, i, "'" + std::string(cell) + "' is negative");
      switch (columns_[i]) {
        case Column::kTimestamp:
          q.timestamp_ms = value;
          break;
        case Column::kLatencySlo:
          q.latency_slo_ms = value;
          break;
        case Column::kMinAccuracy:
          q.min_accuracy = value;
          break;
        case Column::kMaxCost:
          q.max_cost = value;
          break;
        case Column::kModel:
        case Column::kTask:
          break;
      }
    }
    return q;
  }

  Status Error(int line_no, const std::string& what) const {
    return InvalidArgument(std::string(source_) + ":" + std::to_string(line_no) + ": " + what);
  }

  Status CellError(int line_no, size_t column, const std::string& what) const {
    return Error(line_no,
                 "column " + std::to_string(column + 1) + " (" + names_[column] + "): " + what);
  }

  size_t TimestampColumn() const {
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (columns_[i] == Column::kTimestamp) return i;
    }
    return 0;
  }

 private:
  std::string_view source_;
  std::vector<Column> columns_;
  std::vector<std::string> names_;
};

}  // namespace

StatusOr<Trace> ParseTraceCsv(std::string_view text, std::string_view source) {
  Parser parser(source);
  Trace trace;
  // Sized once, to the lines with content (blank ones are skipped below, so
  // a file of blank lines reserves nothing): an hour at 2,000 q/s is
  // millions of rows, and growing by doubling moved them all several times.
  size_t rows = 0;
  bool content = false;
  for (const char c : text) {
    if (c == '\n') {
      rows += content ? 1 : 0;
      content = false;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      content = true;
    }
  }
  trace.queries.reserve(rows + (content ? 1 : 0));
  bool have_header = false;
  int line_no = 0;
  size_t from = 0;
  while (from < text.size()) {
    const size_t nl = text.find('\n', from);
    const std::string_view line =
        text.substr(from, nl == std::string_view::npos ? std::string_view::npos : nl - from);
    from = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (Trim(line).empty()) continue;
    if (!have_header) {
      SOMM_RETURN_IF_ERROR(parser.Header(line, line_no));
      have_header = true;
      continue;
    }
    SOMM_ASSIGN_OR_RETURN(TraceQuery q, parser.Row(line, line_no));
    if (!trace.queries.empty() && q.timestamp_ms < trace.queries.back().timestamp_ms) {
      return parser.CellError(line_no, parser.TimestampColumn(),
                              "timestamps must not decrease (line " +
                                  std::to_string(trace.queries.back().line) + " has a later one)");
    }
    trace.queries.push_back(std::move(q));
  }
  if (!have_header) return InvalidArgument(std::string(source) + ": empty trace (no header row)");
  if (trace.queries.empty()) return InvalidArgument(std::string(source) + ": trace has no queries");
  return trace;
}

StatusOr<Trace> LoadTraceCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open trace file '" + path + "'");
  // Read into one string of the file's size (a stream's buffer grew and was
  // then copied out whole).
  std::string text;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size >= 0) {
    in.seekg(0, std::ios::beg);
    text.resize(static_cast<size_t>(size));
    in.read(text.data(), size);
    text.resize(static_cast<size_t>(in.gcount()));
  } else {  // not seekable (a pipe): as it comes
    in.clear();
    std::stringstream whole;
    whole << in.rdbuf();
    text = std::move(whole).str();
  }
  if (in.bad()) return Unavailable("cannot read trace file '" + path + "'");
  return ParseTraceCsv(text, path);
}

}  // namespace somm::loadgen
