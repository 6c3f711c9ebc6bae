#pragma once
// Minimal SVG charts written by our own code (no browser or plotting library
// needed): a multi-series line chart with optional log y-axis, and a heatmap.
#include <string>
#include <vector>

namespace ss::cli {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log_y = false;
  std::vector<Series> series;
  std::string render(int width = 900, int height = 520) const;
};

struct Heatmap {
  std::string title, x_label, y_label;
  std::vector<std::string> row_labels, col_labels;
  std::vector<std::vector<double>> values;  // [row][col], colour scaled to [0, max]
  std::string render(int cell = 28) const;
};

std::string xml_escape(const std::string& s);

}  // namespace ss::cli
