#include "exogym/runtime/output/json_numbers.h"

#include <cmath>
#include <limits>
#include <string>

namespace exogym::runtime::output {

using nlohmann::json;

json with_finite_numbers(json doc) {
  if (doc.is_number_float()) {
    const double x = doc.get<double>();
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    return doc;
  }
  if (doc.is_structured()) {
    for (auto& item : doc) item = with_finite_numbers(std::move(item));
  }
  return doc;
}

double json_number(const json& value) {
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (text == "inf") return std::numeric_limits<double>::infinity();
    if (text == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return value.get<double>();
}

}  // namespace exogym::runtime::output
