// The report as one self-contained HTML page: the report's JSON, the inlined third-party code
// (Chart.js and its error-bar and box-plot modules, diff2html with highlight.js) and peak's page
// code (web/src/app.js), which draws everything from the JSON in the browser.
#include <cctype>

#include <fmt/format.h>

#include "report/assets.h"
#include "report/html.h"
#include "report/report.h"

namespace peak {

namespace {

bool starts_with_ci(std::string_view text, size_t i, std::string_view word) {
  if (text.size() - i < word.size()) return false;
  for (size_t k = 0; k < word.size(); ++k)
    if (std::tolower(static_cast<unsigned char>(text[i + k])) != word[k]) return false;
  return true;
}

// Script text that cannot end its <script> element early or enter the HTML parser's escaped
// states: "<!--", "<script" and "</script" are written with "\x3C", which means "<" in the
// string and regular-expression literals where these sequences occur in JavaScript.
std::string js_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 64);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' && (starts_with_ci(text, i, "<!--") || starts_with_ci(text, i, "<script") ||
                           starts_with_ci(text, i, "</script"))) {
      out += "\\x3C";
      continue;
    }
    out += text[i];
  }
  return out;
}

// JSON inside <script type="application/json">: every "<" as \u003c (only strings hold one).
std::string json_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 64);
  for (char c : text) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

// Style text: "</" cannot end the <style> element early ("<\/" in CSS strings).
std::string css_safe(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') out += '\\';
  }
  return out;
}

std::string escape_attr(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

Result<std::string> html_page(const std::string& title, const nlohmann::json& data,
                              const std::string& live_url) {
  static const char* kScripts[] = {"chart.js", "chartjs-chart-error-bars.js",
                                   "chartjs-chart-boxplot.js", "diff2html-ui.js", "app.js"};
  static const char* kStyles[] = {"diff2html.css", "highlight.css", "app.css"};
  for (const char* name : kScripts)
    if (web_asset(name).empty())
      return make_error(fmt::format(
          "this peak was built without its web assets ({} is missing): run "
          "scripts/setup-debian.sh (it installs them under web/node_modules with npm ci) and "
          "build again",
          name));
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<meta name=\"generator\" content=\"peak\">\n";
  h += fmt::format("<title>{}</title>\n", escape_attr(title));
  for (const char* name : kStyles)
    h += fmt::format("<style data-asset=\"{}\">\n{}\n</style>\n", name, css_safe(web_asset(name)));
  h += "</head>\n";
  h += fmt::format("<body data-live=\"{}\">\n", escape_attr(live_url));
  h += "<div id=\"app\"><noscript>This report draws its charts with JavaScript.</noscript></div>\n";
  h += "<script type=\"application/json\" id=\"peak-data\">";
  h += json_safe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  h += "</script>\n";
  for (const char* name : kScripts)
    h += fmt::format("<script data-asset=\"{}\">\n{}\n</script>\n", name, js_safe(web_asset(name)));
  h += "</body>\n</html>\n";
  return h;
}

Result<std::string> render_html(const Report& r, const std::string& live_url) {
  return html_page(fmt::format("peak report: {}", r.kernel), render_json(r), live_url);
}

}  // namespace peak
