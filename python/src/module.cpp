// actsim._core: the pybind11 bindings of bridge.hpp. Rows become dicts keyed by the CSV's
// column names with values converted from the CSV's text (row_dict); simulation runs with the GIL
// released. python/actsim/__init__.py is the public face (keyword arguments, ConfigError).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <charconv>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bridge.hpp"
#include "sim/error.hpp"
#include "sim_io/output.hpp"

namespace py = pybind11;

namespace {

// Columns whose values are text even when they look like numbers (a model file named "7b").
const std::set<std::string, std::less<>>& text_columns() {
  static const std::set<std::string, std::less<>> columns = {
      "source",    "model",     "device",    "strategy",   "profile", "precision", "attention",
      "sp",        "optimizer", "allocator", "peak_phase", "error",   "impl",
      "impl_version"};  // implver: "4.48" is a release, not a number
  return columns;
}

// A CSV field as a Python value: empty -> None; "true"/"false" -> bool; a decimal integer ->
// int; a decimal number -> float (the same double the text denotes); anything else -> str.
py::object value_of(std::string_view column, const std::string& text) {
  if (text.empty()) return py::none();
  if (text_columns().count(column) != 0) return py::str(text);
  if (text == "true") return py::bool_(true);
  if (text == "false") return py::bool_(false);
  const char* first = text.data();
  const char* last = first + text.size();
  int64_t i = 0;
  if (auto [end, ec] = std::from_chars(first, last, i); ec == std::errc() && end == last)
    return py::int_(i);
  double d = 0;
  if (auto [end, ec] = std::from_chars(first, last, d, std::chars_format::fixed);
      ec == std::errc() && end == last)
    return py::float_(d);
  return py::str(text);
}

py::dict row_dict(const std::vector<std::string>& columns, const actsim_py::Fields& fields) {
  py::dict d;
  for (std::size_t i = 0; i < columns.size() && i < fields.size(); ++i)
    d[py::str(columns[i])] = value_of(columns[i], fields[i]);
  return d;
}

py::dict schema_row(const actsim_py::Fields& fields) {
  return row_dict(sim_io::csv_columns(), fields);
}

std::vector<std::filesystem::path> dirs_of(const std::string& package_dir) {
  return actsim_py::search_dirs(package_dir);
}

// An iterator over a sweep's rows; the wait for each row releases the GIL.
class SweepIterator {
 public:
  SweepIterator(const std::vector<std::string>& args, const std::string& package_dir) {
    const actsim_cli::Invocation inv = actsim_py::parse(args);
    const auto dirs = dirs_of(package_dir);
    py::gil_scoped_release release;
    stream_ = std::make_unique<actsim_py::SweepStream>(inv, dirs);
  }
  ~SweepIterator() {
    // Cancels and joins the sweep thread, which never takes the GIL.
    py::gil_scoped_release release;
    stream_.reset();
  }
  py::dict next() {
    actsim_py::Fields fields;
    bool more = false;
    {
      py::gil_scoped_release release;
      more = stream_ && stream_->next(fields);
    }
    if (!more) {
      {
        py::gil_scoped_release release;
        stream_.reset();
      }
      throw py::stop_iteration();
    }
    return schema_row(fields);
  }
  int64_t rows() const { return stream_ ? stream_->rows() : 0; }

 private:
  std::unique_ptr<actsim_py::SweepStream> stream_;
};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "actsim's simulator (use the actsim package, not this module)";
  static py::exception<sim::ConfigError> config_error(m, "ConfigError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const sim::ConfigError& e) {
      config_error(e.what());
    } catch (const actsim_py::UsageError& e) {
      config_error(e.what());
    }
  });

  m.def("columns", [] { return sim_io::csv_columns(); }, "CSV schema v1's columns, in order");

  m.def(
      "run",
      [](const std::vector<std::string>& args, const std::string& package_dir) {
        const actsim_cli::Invocation inv = actsim_py::parse(args);
        const auto dirs = dirs_of(package_dir);
        std::vector<actsim_py::Fields> rows;
        {
          py::gil_scoped_release release;
          rows = actsim_py::run(inv, dirs);
        }
        py::list out;
        for (const auto& r : rows) out.append(schema_row(r));
        return out;
      },
      py::arg("args"), py::arg("package_dir"));

  m.def(
      "run_fields",
      [](const std::vector<std::string>& args, const std::string& package_dir) {
        const actsim_cli::Invocation inv = actsim_py::parse(args);
        const auto dirs = dirs_of(package_dir);
        py::gil_scoped_release release;
        return actsim_py::run(inv, dirs);
      },
      py::arg("args"), py::arg("package_dir"), "run's rows as the CSV's text fields");

  m.def(
      "plan",
      [](const std::vector<std::string>& args, const std::string& package_dir) {
        const actsim_cli::Invocation inv = actsim_py::parse(args);
        const auto dirs = dirs_of(package_dir);
        actsim_py::Table t;
        {
          py::gil_scoped_release release;
          t = actsim_py::plan(inv, dirs);
        }
        return row_dict(t.columns, t.rows.front());
      },
      py::arg("args"), py::arg("package_dir"));

  m.def(
      "valley",
      [](const std::vector<std::string>& args, const std::string& package_dir) {
        const actsim_cli::Invocation inv = actsim_py::parse(args);
        const auto dirs = dirs_of(package_dir);
        actsim_py::Table t;
        {
          py::gil_scoped_release release;
          t = actsim_py::valley(inv, dirs);
        }
        py::list out;
        for (const auto& r : t.rows) {
          py::dict d = row_dict(t.columns, r);
          for (const char* flag : {"is_m_star", "is_m_star_simulated", "is_sqrt_n"})
            d[flag] = py::bool_(d[flag].cast<int64_t>() != 0);
          out.append(d);
        }
        return out;
      },
      py::arg("args"), py::arg("package_dir"));

  m.def(
      "explain_peak",
      [](const std::vector<std::string>& args, const std::string& package_dir, int items) {
        const actsim_cli::Invocation inv = actsim_py::parse(args);
        const auto dirs = dirs_of(package_dir);
        std::vector<actsim_py::PeakEntry> found;
        {
          py::gil_scoped_release release;
          found = actsim_py::explain_peak(inv, dirs, items);
        }
        py::list out;
        for (const auto& e : found) {
          py::dict d;
          d["bytes"] = e.bytes;
          d["count"] = e.count;
          d["category"] = e.category;
          d["block"] = e.block < 0 ? py::object(py::none()) : py::object(py::int_(e.block));
          d["what"] = e.what;
          d["why"] = e.why;
          out.append(d);
        }
        return out;
      },
      py::arg("args"), py::arg("package_dir"), py::arg("items"));

  m.def(
      "catalog",
      [](const std::string& package_dir) {
        const auto dirs = dirs_of(package_dir);
        py::list models;
        py::list devices;
        for (const actsim_py::CatalogRow& r : actsim_py::catalog(dirs)) {
          py::dict d;
          d["name"] = r.name;
          d["path"] = r.path;
          if (!r.error.empty()) {
            d["error"] = r.error;
          } else if (r.kind == "model") {
            d["family"] = r.family;
            d["layers"] = r.layers;
            d["hidden"] = r.hidden;
            d["heads"] = r.heads;
            d["kv_heads"] = r.kv_heads;
            d["params"] = r.params;
          } else {
            d["label"] = r.label;
            d["hbm_bytes"] = r.hbm_bytes;
            d["peak_bf16_flops_per_s"] = r.peak_bf16_flops_per_s;
            d["hbm_bytes_per_s"] = r.hbm_bytes_per_s;
          }
          (r.kind == "model" ? models : devices).append(d);
        }
        py::list searched;
        for (const auto& d : dirs) searched.append(d.string());
        py::dict out;
        out["models"] = models;
        out["devices"] = devices;
        out["searched"] = searched;
        return out;
      },
      py::arg("package_dir"));

  py::class_<SweepIterator>(m, "SweepIterator")
      .def(py::init<const std::vector<std::string>&, const std::string&>())
      .def("__iter__", [](SweepIterator& it) -> SweepIterator& { return it; })
      .def("__next__", &SweepIterator::next)
      .def("__len__", &SweepIterator::rows);
}
