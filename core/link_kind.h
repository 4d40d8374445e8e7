// The kind of link a group of ranks crosses. to_string / parse_link_kind: core/calibration.h.
#pragma once

namespace meshwork {

enum class LinkKind { intra_node, inter_node };

}  // namespace meshwork
