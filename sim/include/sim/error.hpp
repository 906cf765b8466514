// Errors the simulator reports about its inputs. Every one names where the bad value came from
// (a file path, or a flag such as "--batch") and the field, so front ends can print one line.
#pragma once

#include <stdexcept>
#include <string>

namespace sim {

// A config value that cannot be simulated. what() is the full one-line message
// "<where>: <field>: <message>".
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string where, std::string field, const std::string& message);
  const std::string& where() const { return where_; }  // file path or flag name
  const std::string& field() const { return field_; }  // JSON key or knob name

 private:
  std::string where_;
  std::string field_;
};

// A model or knob actsim does not model; the message reads "not supported yet: <feature>".
class Unsupported : public ConfigError {
 public:
  Unsupported(std::string where, std::string field, const std::string& feature);
};

}  // namespace sim
