#include "cli/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace ss::cli {

namespace {
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string num(double v) {
  char buf[32];
  if (std::fabs(v) >= 1e5 || (std::fabs(v) < 1e-2 && v != 0))
    std::snprintf(buf, sizeof buf, "%.3g", v);
  else if (std::fabs(v - std::round(v)) < 1e-9)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// "Nice" linear ticks covering [lo, hi].
std::vector<double> linear_ticks(double lo, double hi, int target) {
  const double span = hi - lo;
  if (!(span > 0)) return {lo};
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(v);
  return t;
}
}  // namespace

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string LineChart::render(int W, int H) const {
  const double ml = 80, mr = 200, mt = 50, mb = 60;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (log_y && s.y[i] <= 0)) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 1, y1 = 10;
  if (x1 <= x0) x1 = x0 + 1;
  auto fy = [&](double v) { return log_y ? std::log10(v) : v; };
  double ly0 = fy(y0), ly1 = fy(y1);
  if (log_y) ly0 = std::floor(ly0 * 4) / 4, ly1 = std::ceil(ly1 * 4) / 4;
  if (ly1 <= ly0) ly1 = ly0 + 1;
  const double pw = W - ml - mr, ph = H - mt - mb;
  auto px = [&](double x) { return ml + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return mt + ph - (fy(y) - ly0) / (ly1 - ly0) * ph; };
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">" << xml_escape(title)
    << "</text>\n";
  // Axes and grid.
  o << "<g stroke=\"#ddd\">\n";
  std::vector<double> yt;
  if (log_y) {
    for (double e = std::floor(ly0); e <= ly1; e += 1)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if (std::log10(v) >= ly0 - 1e-9 && std::log10(v) <= ly1 + 1e-9) yt.push_back(v);
      }
  } else {
    yt = linear_ticks(ly0, ly1, 6);
  }
  for (double v : yt)
    o << "<line x1=\"" << ml << "\" x2=\"" << ml + pw << "\" y1=\"" << py(v) << "\" y2=\"" << py(v) << "\"/>\n";
  const auto xt = linear_ticks(x0, x1, 8);
  for (double v : xt)
    o << "<line x1=\"" << px(v) << "\" x2=\"" << px(v) << "\" y1=\"" << mt << "\" y2=\"" << mt + ph << "\"/>\n";
  o << "</g>\n<g fill=\"#333\">\n";
  for (double v : yt)
    o << "<text x=\"" << ml - 6 << "\" y=\"" << py(v) + 4 << "\" text-anchor=\"end\">" << num(v) << "</text>\n";
  for (double v : xt)
    o << "<text x=\"" << px(v) << "\" y=\"" << mt + ph + 18 << "\" text-anchor=\"middle\">" << num(v) << "</text>\n";
  o << "</g>\n<rect x=\"" << ml << "\" y=\"" << mt << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#333\"/>\n"
    << "<text x=\"" << ml + pw / 2 << "\" y=\"" << H - 15 << "\" text-anchor=\"middle\">" << xml_escape(x_label)
    << "</text>\n"
    << "<text transform=\"translate(20," << mt + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << xml_escape(y_label) << (log_y ? " (log scale)" : "") << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const char* col = kColors[k % (sizeof kColors / sizeof kColors[0])];
    o << "<g class=\"series\" data-name=\"" << xml_escape(s.name) << "\">\n<polyline fill=\"none\" stroke=\"" << col
      << "\" stroke-width=\"1.6\" points=\"";
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (log_y && s.y[i] <= 0)) continue;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(s.x[i]),
                    py(std::clamp(s.y[i], std::pow(10.0, ly0), std::pow(10.0, ly1))));
      o << buf;
    }
    o << "\"/>\n</g>\n";
    const double ly = mt + 10 + 20.0 * static_cast<double>(k);
    o << "<line x1=\"" << ml + pw + 15 << "\" x2=\"" << ml + pw + 40 << "\" y1=\"" << ly << "\" y2=\"" << ly
      << "\" stroke=\"" << col << "\" stroke-width=\"3\"/><text x=\"" << ml + pw + 46 << "\" y=\"" << ly + 4 << "\">"
      << xml_escape(s.name) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string Heatmap::render(int cell) const {
  const int ml = 90, mt = 60, rows = static_cast<int>(values.size());
  const int cols = rows ? static_cast<int>(values[0].size()) : 0;
  const int W = ml + cols * cell + 170, H = std::max(mt + rows * cell + 60, mt + 260);
  double mx = 0;
  for (const auto& r : values)
    for (double v : r) mx = std::max(mx, v);
  if (mx <= 0) mx = 1;
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << xml_escape(title)
    << "</text>\n";
  auto shade_of = [&](double v) {
    const int shade = static_cast<int>(255 - 215 * std::clamp(v / mx, 0.0, 1.0));
    char col[16];
    std::snprintf(col, sizeof col, "#%02x%02xff", shade, shade);
    return std::string(col);
  };
  for (int r = 0; r < rows; ++r) {
    o << "<text x=\"" << ml - 6 << "\" y=\"" << mt + r * cell + cell / 2 + 4 << "\" text-anchor=\"end\">"
      << xml_escape(r < static_cast<int>(row_labels.size()) ? row_labels[static_cast<size_t>(r)] : "") << "</text>\n";
    for (int c = 0; c < cols; ++c) {
      const double v = values[static_cast<size_t>(r)][static_cast<size_t>(c)];
      o << "<rect x=\"" << ml + c * cell << "\" y=\"" << mt + r * cell << "\" width=\"" << cell << "\" height=\""
        << cell << "\" fill=\"" << shade_of(v) << "\" stroke=\"#fff\"><title>" << num(v) << "</title></rect>\n";
    }
  }
  for (int c = 0; c < cols; ++c)
    if (cols <= 40 || c % (cols / 20 + 1) == 0)
      o << "<text x=\"" << ml + c * cell + cell / 2 << "\" y=\"" << mt + rows * cell + 16
        << "\" text-anchor=\"middle\">"
        << xml_escape(c < static_cast<int>(col_labels.size()) ? col_labels[static_cast<size_t>(c)] : "") << "</text>\n";
  o << "<text x=\"" << ml + cols * cell / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">"
    << xml_escape(x_label) << "</text>\n"
    << "<text transform=\"translate(16," << mt + rows * cell / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << xml_escape(y_label) << "</text>\n";
  // The colour scale: 20 steps from 0 (bottom) to the maximum (top), ticks
  // at quarters, labelled with what the cells measure.
  const int sx = ml + cols * cell + 20, steps = 20, step_h = 10, top = mt;
  o << "<g id=\"colour-scale\">\n";
  for (int i = 0; i < steps; ++i) {
    const double v = mx * (steps - i - 0.5) / steps;
    o << "<rect x=\"" << sx << "\" y=\"" << top + i * step_h << "\" width=\"16\" height=\"" << step_h << "\" fill=\""
      << shade_of(v) << "\"/>\n";
  }
  o << "<rect x=\"" << sx << "\" y=\"" << top << "\" width=\"16\" height=\"" << steps * step_h
    << "\" fill=\"none\" stroke=\"#666\"/>\n";
  for (int q = 0; q <= 4; ++q) {
    const double y = top + steps * step_h * (1.0 - q / 4.0);
    o << "<line x1=\"" << sx + 16 << "\" x2=\"" << sx + 20 << "\" y1=\"" << num(y) << "\" y2=\"" << num(y)
      << "\" stroke=\"#666\"/><text x=\"" << sx + 23 << "\" y=\"" << num(y + 4) << "\">" << num(mx * q / 4.0)
      << "</text>\n";
  }
  o << "<text transform=\"translate(" << sx + 8 << "," << top + steps * step_h + 16
    << ") rotate(90)\" font-size=\"10\">" << xml_escape(scale_label) << "</text>\n</g>\n</svg>\n";
  return o.str();
}

std::string KeptChart::render(int pw, int ph) const {
  const int ml = 60, mt = 50, gap = 70, mb = 50;
  const int W = ml + static_cast<int>(panels.size()) * (pw + gap), H = mt + ph + mb;
  int64_t x_max = 1;
  for (const auto& p : panels)
    if (!p.x.empty()) x_max = std::max(x_max, p.x.back());
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << xml_escape(title)
    << "</text>\n";
  const double sx = static_cast<double>(pw) / static_cast<double>(x_max);
  const double sy = static_cast<double>(ph) / static_cast<double>(x_max);
  for (size_t k = 0; k < panels.size(); ++k) {
    const auto& p = panels[k];
    const double left = ml + static_cast<double>(k) * (pw + gap), bottom = mt + ph;
    o << "<rect x=\"" << left << "\" y=\"" << mt << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#999\"/>\n"
      << "<text x=\"" << left + pw / 2.0 << "\" y=\"" << mt - 8 << "\" text-anchor=\"middle\">" << xml_escape(p.name)
      << "</text>\n";
    o << "<g fill=\"" << kColors[k % 8] << "\">\n";
    for (size_t i = 0; i < p.x.size(); ++i) {
      const double x0 = left + (i == 0 ? 0.0 : static_cast<double>(p.x[i - 1]) * sx);
      const double w = std::max(1.0, left + static_cast<double>(p.x[i]) * sx - x0);
      // Positions sharing a pixel row take their largest share; runs of rows
      // with one share become one rectangle (the picture's resolution, not
      // the stream's, bounds its size).
      std::vector<float> row(static_cast<size_t>(ph), 0.0f);
      for (const auto& [pos, share] : p.kept[i]) {
        const auto r = static_cast<size_t>(std::min<double>(ph - 1, static_cast<double>(pos) * sy));
        row[r] = std::max(row[r], std::ceil(share * 4.0f) / 4.0f);  // four shades
      }
      for (int a = 0; a < ph;) {
        int b = a + 1;
        while (b < ph && row[static_cast<size_t>(b)] == row[static_cast<size_t>(a)]) ++b;
        if (row[static_cast<size_t>(a)] > 0)
          o << "<rect x=\"" << num(x0) << "\" y=\"" << bottom - b << "\" width=\"" << num(w) << "\" height=\"" << b - a
            << "\" opacity=\"" << num(0.2 + 0.8 * row[static_cast<size_t>(a)]) << "\"/>\n";
        a = b;
      }
    }
    o << "</g>\n";
    for (double t : linear_ticks(0, static_cast<double>(x_max), 4)) {
      o << "<text x=\"" << left + t * sx << "\" y=\"" << bottom + 14 << "\" text-anchor=\"middle\">" << num(t)
        << "</text>\n"
        << "<text x=\"" << left - 4 << "\" y=\"" << bottom - t * sy + 4 << "\" text-anchor=\"end\">" << num(t)
        << "</text>\n";
    }
    o << "<text x=\"" << left + pw / 2.0 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">stream position</text>\n";
  }
  o << "<text transform=\"translate(14," << mt + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">kept token "
    << "position (shade: share of layer/KV-head caches)</text>\n</svg>\n";
  return o.str();
}

}  // namespace ss::cli
