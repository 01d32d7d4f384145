#include "engine/devices.h"

#include <algorithm>
#include <cctype>
#include <future>
#include <map>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {

namespace {

constexpr const char* kWhatToWrite = "write all, device indices (0,1) or one name substring (H100)";

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

std::string lowered(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string named(const SelectedDevice& d) {
  return fmt::format("{} ({})", d.selector, d.facts.name);
}

// The devices of more than one model, named, or "" when they are all of one.
std::string mixed_models(const std::vector<SelectedDevice>& devs) {
  std::map<std::string, std::vector<std::string>> by_model;
  for (const auto& d : devs) by_model[d.facts.name].push_back(d.selector);
  if (by_model.size() <= 1) return "";
  std::vector<std::string> parts;
  for (const auto& [model, sel] : by_model)
    parts.push_back(
        fmt::format("{} on {} {}", model, sel.size() > 1 ? "devices" : "device", join(sel, ", ")));
  return join(parts, "; ");
}

// Every device the host lists, by index, until one is missing.
std::vector<SelectedDevice> enumerate(const DeviceProbe& probe) {
  std::vector<SelectedDevice> found;
  for (int i = 0; i < kMaxDevices; ++i) {
    std::string sel = std::to_string(i);
    auto f = probe(sel);
    if (!f) break;
    found.push_back({sel, *f});
  }
  return found;
}

}  // namespace

Result<DevicesSpec> parse_devices_spec(const std::string& spec) {
  const std::string s = trim(spec);
  DevicesSpec out;
  if (s.empty())
    return make_error(fmt::format("--devices needs a value: {}", kWhatToWrite), ErrorKind::input);
  if (lowered(s) == "all") {
    out.all = true;
    return out;
  }
  if (s.find(',') == std::string::npos && !all_digits(s)) {
    out.name = s;
    return out;
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = s.find(',', start);
    const std::string item =
        trim(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!all_digits(item) || item.size() > 4)
      return make_error(
          fmt::format("--devices '{}': '{}' is not a device index; {}", s, item, kWhatToWrite),
          ErrorKind::input);
    const int i = std::stoi(item);
    if (std::find(out.indices.begin(), out.indices.end(), i) != out.indices.end())
      return make_error(fmt::format("--devices '{}': device {} is named twice", s, i),
                        ErrorKind::input);
    out.indices.push_back(i);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string DeviceSelection::text() const {
  std::vector<std::string> names;
  for (const auto& d : devices) names.push_back(named(d));
  std::string t = fmt::format("{} device{}: {}", devices.size(), devices.size() == 1 ? "" : "s",
                              join(names, ", "));
  if (devices.size() > 1) t += "; bench shapes in turn";
  if (!left_out.empty()) t += fmt::format("; left out: {}", join(left_out, ", "));
  return t;
}

Result<DeviceSelection> select_devices(const std::string& spec, const DeviceProbe& probe) {
  auto parsed = parse_devices_spec(spec);
  if (!parsed) return Error{parsed.error()};
  DeviceSelection sel;
  const std::string what = trim(spec);
  auto refuse_mixed = [&](const std::vector<SelectedDevice>& devs) -> Status {
    std::string mixed = mixed_models(devs);
    if (mixed.empty()) return Status::ok();
    return Status::error(
        fmt::format("--devices '{}' names devices of different models ({}): their times do not "
                    "rank against each other; pick devices of one model, or --devices all "
                    "(the best device's model)",
                    what, mixed),
        ErrorKind::input);
  };
  if (!parsed->indices.empty()) {
    // All at once: each probe is a runner's start (a second or more with its microbenchmark).
    std::vector<std::future<Result<DeviceFacts>>> probes;
    for (int i : parsed->indices)
      probes.push_back(std::async(std::launch::async, probe, std::to_string(i)));
    for (size_t k = 0; k < probes.size(); ++k) {
      const int i = parsed->indices[k];
      std::string s = std::to_string(i);
      auto f = probes[k].get();
      if (!f)
        return make_error(fmt::format("--devices '{}': device {}: {}", what, i, f.error()),
                          ErrorKind::environment);
      sel.devices.push_back({s, *f});
    }
    if (Status st = refuse_mixed(sel.devices); !st) return Error{st.message(), st.kind()};
    return sel;
  }
  if (parsed->all) {
    auto best = probe("");
    if (!best) return make_error(best.error(), ErrorKind::environment);
    for (auto& d : enumerate(probe)) {
      if (d.facts.name == best->name)
        sel.devices.push_back(std::move(d));
      else
        sel.left_out.push_back(named(d) + ", another model");
    }
    // The best device always runs, whatever the listing said.
    if (sel.devices.empty()) sel.devices.push_back({"", *best});
    return sel;
  }
  std::vector<SelectedDevice> listed = enumerate(probe);
  for (auto& d : listed)
    if (lowered(d.facts.name).find(lowered(parsed->name)) != std::string::npos)
      sel.devices.push_back(d);
  if (sel.devices.empty()) {
    std::vector<std::string> names;
    for (const auto& d : listed) names.push_back(named(d));
    return make_error(fmt::format("--devices '{}': no device's name holds '{}'; the devices "
                                  "are: {}",
                                  what, parsed->name, names.empty() ? "none" : join(names, ", ")),
                      listed.empty() ? ErrorKind::environment : ErrorKind::input);
  }
  if (Status st = refuse_mixed(sel.devices); !st) return Error{st.message(), st.kind()};
  return sel;
}

std::string runner_selector(const DeviceFacts& facts, const std::string& selector) {
  for (const char* key : {"device_index", "cuda_device_index"})
    if (auto it = facts.extra.find(key); it != facts.extra.end() && all_digits(it->second))
      return it->second;
  return selector;
}

std::optional<std::string> cuda_visible_device(const DeviceFacts& facts, const char* parent) {
  auto it = facts.extra.find("cuda_device_index");
  if (it == facts.extra.end() || !all_digits(it->second)) return std::nullopt;
  if (parent == nullptr || std::string_view(parent).empty()) return it->second;
  std::vector<std::string> listed;
  std::string_view rest = parent;
  for (size_t comma; (comma = rest.find(',')) != std::string_view::npos;
       rest.remove_prefix(comma + 1))
    listed.push_back(trim(rest.substr(0, comma)));
  listed.push_back(trim(rest));
  const size_t index = std::stoul(it->second);
  if (index >= listed.size()) return std::nullopt;  // not the parent's view: leave it alone
  return listed[index];
}

}  // namespace peak
