#include "sim/error.hpp"

#include <utility>

namespace sim {

ConfigError::ConfigError(std::string where, std::string field, const std::string& message)
    : std::runtime_error(where + ": " + field + ": " + message),
      where_(std::move(where)),
      field_(std::move(field)) {}

Unsupported::Unsupported(std::string where, std::string field, const std::string& feature)
    : ConfigError(std::move(where), std::move(field), "not supported yet: " + feature) {}

}  // namespace sim
