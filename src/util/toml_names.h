#pragma once
// What a TOML value is, as error messages name it ("must be a string, found an integer").
#include <string>

#include <toml++/toml.h>

namespace peak {

inline std::string toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a number";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date or time";
  }
}

}  // namespace peak
