#include "core/mesh_json.h"

namespace meshwork {

nlohmann::json to_json(const MeshShape& shape) {
  nlohmann::json j = nlohmann::json::object();
  for (Axis a : kAxes)
    if (a != Axis::pp || shape[a] != 1) j[std::string(axis_name(a))] = shape[a];
  if (shape.ep != 1) j[std::string(kEpName)] = shape.ep;  // a dense run's mesh reads as before ep
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
  // ep is never auto in a config: it is not a factor of the world, so nothing could fill it.
  if (auto it = doc.find(std::string(kEpName)); it != doc.end()) {
    const bool whole = it->is_number_integer();
    const int64_t v = whole ? it->get<int64_t>() : 0;
    if (!whole || v < 1 || v > (1 << 24))
      return Error{field + "." + std::string(kEpName), it->dump(),
                   "must be a whole number >= 1 (expert-parallel degree; it borrows its ranks from dp_shard * cp * tp)"};
    shape.ep = static_cast<int>(v);
  }
  return shape;
}

}  // namespace meshwork
