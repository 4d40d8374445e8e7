#pragma once
// Placeholder header of the workbench library until issue 7 lands.
namespace meshwork::ui {
int placeholder();
}
