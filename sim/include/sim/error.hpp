// Errors the simulator reports about its inputs. Every one names where the bad value came from
// (a file path, or a flag such as "--batch") and the field, so front ends can print one line.
#pragma once

#include <stdexcept>
#include <string>

namespace sim {

// A config value that cannot be simulated. what() is the full one-line message
// "<where>: <field>: <message>", naming a knob once: where `where` is a flag and `field` is the
// knob that flag sets ("--lora-rank" and "lora_rank"), it reads "<where>: <message>".
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string where, std::string field, std::string message);
  const std::string& where() const { return where_; }      // file path or flag name
  const std::string& field() const { return field_; }      // JSON key or knob name
  const std::string& message() const { return message_; }  // what() without where and field

 private:
  std::string where_;
  std::string field_;
  std::string message_;
};

// The one-line text ConfigError::what() holds (the rule above; exposed for tests).
std::string config_error_text(const std::string& where, const std::string& field,
                              const std::string& message);

// A model or knob actsim does not model; the message reads "not supported yet: <feature>".
class Unsupported : public ConfigError {
 public:
  Unsupported(std::string where, std::string field, const std::string& feature);
};

// A feature the simulated code base itself lacks (its release has no such option or path), so
// no later actsim can simulate it there either; the message reads "not in the code simulated:
// <feature>". Unsupported, above, is for what actsim has not modeled yet.
class NotInCode : public ConfigError {
 public:
  NotInCode(std::string where, std::string field, const std::string& feature);
};

}  // namespace sim
