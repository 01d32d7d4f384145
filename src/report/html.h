#pragma once
// The HTML page shared by reports and stats: data as JSON, drawn by web/src/app.js.
#include <string>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace peak {

// A self-contained page showing `data` (a report's or stats' JSON, told apart by "kind").
// `live_url` (may be empty): the page polls it for new JSON and redraws.
Result<std::string> html_page(const std::string& title, const nlohmann::json& data,
                              const std::string& live_url = "");

}  // namespace peak
