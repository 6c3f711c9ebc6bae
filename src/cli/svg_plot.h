#pragma once
// Minimal SVG charts written by our own code (no browser or plotting library
// needed): a multi-series line chart with optional log y-axis, and a heatmap.
#include <cstdint>
#include <string>
#include <utility>
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
  std::string scale_label = "value";        // what the colour scale measures
  std::string render(int cell = 28) const;
};

// Which token positions a cache keeps as a stream advances: one panel per
// policy, x the stream position, y the kept tokens' positions, shaded by
// the share of (layer, KV head) caches keeping them (1 for position-only
// policies).
struct KeptPanel {
  std::string name;
  std::vector<int64_t> x;                                    // stream positions sampled
  std::vector<std::vector<std::pair<int64_t, float>>> kept;  // [x] (position, share), ascending
};
struct KeptChart {
  std::string title;
  std::vector<KeptPanel> panels;
  std::string render(int panel_width = 420, int panel_height = 300) const;
};

std::string xml_escape(const std::string& s);

}  // namespace ss::cli
