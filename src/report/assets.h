#pragma once
// The web code inlined into HTML reports, embedded in the binary at build time (CMakeLists.txt,
// PEAK_WEB_ASSETS): chart.js, chartjs-chart-error-bars.js, chartjs-chart-boxplot.js,
// diff2html-ui.js, diff2html.css, highlight.css (pinned by web/package-lock.json) and peak's
// own app.js and app.css (web/src).
#include <string_view>

namespace peak {

// The content of an asset; empty when this peak was built without it.
std::string_view web_asset(std::string_view name);

}  // namespace peak
