#include "core/mesh_json.h"

namespace meshwork {

nlohmann::json to_json(const MeshShape& shape) {
  nlohmann::json j = nlohmann::json::object();
  for (Axis a : kAxes)
    if (a != Axis::pp || shape[a] != 1) j[std::string(axis_name(a))] = shape[a];
  return j;
}

Result<MeshShape> mesh_shape_from_json(const nlohmann::json& doc, const std::string& field,
                                       bool allow_auto) {
  if (!doc.is_object()) return Error{field, doc.dump(), "must be an object of axis sizes"};
  MeshShape shape;
  for (Axis a : kAxes) {
    const std::string key(axis_name(a));
    auto it = doc.find(key);
    if (it == doc.end()) continue;
    const bool whole = it->is_number_integer();
    const int64_t v = whole ? it->get<int64_t>() : 0;
    if (!whole || v > (1 << 24) || (v < 1 && !(allow_auto && v == -1)))
      return Error{field + "." + key, it->dump(),
                   allow_auto ? "must be a whole number >= 1, or -1 (auto)"
                              : "must be a whole number >= 1"};
    shape[a] = static_cast<int>(v);
  }
  return shape;
}

}  // namespace meshwork
