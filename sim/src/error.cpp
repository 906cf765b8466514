#include "sim/error.hpp"

#include <cstddef>
#include <utility>

namespace sim {

namespace {

// True when `field` is the knob the flag `where` sets: "--lora-rank" and "lora_rank".
bool flag_names_field(const std::string& where, const std::string& field) {
  if (where.size() != field.size() + 2 || where.rfind("--", 0) != 0) return false;
  for (std::size_t i = 0; i < field.size(); ++i) {
    const char f = field[i] == '_' ? '-' : field[i];
    if (where[i + 2] != f) return false;
  }
  return true;
}

}  // namespace

std::string config_error_text(const std::string& where, const std::string& field,
                              const std::string& message) {
  if (flag_names_field(where, field)) return where + ": " + message;
  return where + ": " + field + ": " + message;
}

ConfigError::ConfigError(std::string where, std::string field, std::string message)
    : std::runtime_error(config_error_text(where, field, message)),
      where_(std::move(where)),
      field_(std::move(field)),
      message_(std::move(message)) {}

Unsupported::Unsupported(std::string where, std::string field, const std::string& feature)
    : ConfigError(std::move(where), std::move(field), "not supported yet: " + feature) {}

NotInCode::NotInCode(std::string where, std::string field, const std::string& feature)
    : ConfigError(std::move(where), std::move(field), "not in the code simulated: " + feature) {}

}  // namespace sim
