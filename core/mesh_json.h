// The one serialized form of a mesh shape: a JSON object keyed by axis_name(),
//   {"dp_replicate":2,"dp_shard":2,"cp":1,"tp":2}        {"pp":4,"dp_replicate":1,...}
// "pp" is written only when it is not 1, so a shape without stages reads and writes exactly as
// it did before pp existed (and older readers, which ignore unknown keys, see the same object).
// used by the run config, the metrics start record, the store and `meshwork plan --json`.
// "2x2x1x2" (MeshShape::compact) is a display format and is never parsed back.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mesh.h"

namespace meshwork {

nlohmann::json to_json(const MeshShape& shape);

// Reads an object of axis sizes. A missing axis (pp in every older file) is 1; a size must be a whole number >= 1, or -1
// (auto) when allow_auto. Errors name `field` + "." + the axis (e.g. "mesh.tp").
Result<MeshShape> mesh_shape_from_json(const nlohmann::json& doc, const std::string& field = "mesh",
                                       bool allow_auto = true);

}  // namespace meshwork
