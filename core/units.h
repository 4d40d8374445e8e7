// Quantities people read: byte sizes ("80GiB", "80GB", "81920MiB") in, and bytes, seconds,
// token rates and counts out ("74.5 GiB", "12.3 ms", "45.1k tokens/s", "8.03B").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace meshwork {

// A size with a unit: B, KB/MB/GB/TB (powers of 1000) or KiB/MiB/GiB/TiB (powers of 1024),
// case-insensitive, optional space and decimals ("1.5 TiB"). A bare number is refused: "80" could
// mean GB or GiB, and the two differ by 7%. Errors name `field`.
Result<int64_t> parse_size(std::string_view text, std::string_view field = "size");

// Binary units with 3 significant digits: "512 B", "1.50 KiB", "74.5 GiB".
std::string format_bytes(double bytes);
// Fixed GiB with one decimal ("74.5"), for table columns.
std::string format_gib(double bytes);
// "850 us", "12.3 ms", "1.25 s", "2 min 05 s", "3 h 02 min".
std::string format_seconds(double seconds);
// "950 tokens/s", "45.1k tokens/s", "1.23M tokens/s".
std::string format_tokens_per_s(double tokens_per_s);
// "107k", "8.03B": parameter and token counts (3 significant digits).
std::string format_count(double count);
// "41.2%"
std::string format_percent(double fraction);

}  // namespace meshwork
