// The words the workbench shows for an error, by its kind (core/error.h): the one place where
// ErrorKind becomes text, as exit_code() is for meshwork and meshtrain. Message boxes, the status
// bar and the pages all ask here, so a store error reads the same wherever it appears.
#pragma once

#include <QString>

#include "core/error.h"

namespace meshwork::ui {

// A heading for the kind: "Invalid input", "Does not fit", "File or store error", ...
QString error_title(ErrorKind kind);
// The error as shown: core's "field: value: allowed", with what to do next when the kind says
// something the message does not (an internal error is a bug to report).
QString error_text(const Error& error);
// One line for the status bar: "<title>: <text>".
QString error_line(const Error& error);
// The run store could not be opened (the store worker has none): an io error.
Error store_unavailable();
// A launch that failed with `message` (the launcher's words), as the status bar shows it.
QString launch_failure_line(const QString& message);

}  // namespace meshwork::ui
