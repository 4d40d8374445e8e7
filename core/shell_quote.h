// Quoting for command lines run through a shell: every command Meshwork runs on a node goes through
// sh -c (an sshd runs the user's shell with the command string), and the launch lines it exports for
// other tools are pasted into one. Every variable part (paths, run names, hosts, flag values) is quoted
// here and nowhere else: no value can ever end a word or inject.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace meshwork {

// POSIX single-quoting: 'text' with each ' written as '\''. Inside single quotes the shell
// interprets nothing, so this is safe for any byte string (NUL cannot occur in argv anyway).
// Words made only of safe characters are returned unquoted, to keep logs readable.
std::string shell_quote(std::string_view word);

// Quotes each word and joins them with spaces: a command line whose argv is exactly `argv`.
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace meshwork
