// Declaration shim (see ../../README.md).
#pragma once
