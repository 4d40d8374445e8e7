// The runtime bundle (scripts/bundle, docs/remote.md "Runtime bundle"): meshtrain and the shared
// libraries a bare node lacks, as one content-addressed meshtrain-<flavour>-<sha12>.tar.zst with
// a manifest beside it. Deploying it:
//
//   - once per node, or once per shared filesystem: every node names its bundle directory by a
//     random id kept in <root>/.fsid (created atomically by the first node that looks: `ln`),
//     so nodes that see the same directory (an NFS home) read the same id, in O(nodes) commands;
//     one node per id uploads, the others then find the bundle there (and upload it themselves
//     if they do not: a copied .fsid is never trusted further than that);
//   - skipped where <root>/<sha256>/.complete exists (the unpacked bundle is renamed into place
//     with the marker already inside, so the marker means "complete");
//   - resumable: the archive goes to <root>/<sha256>.tar.zst.part; after a cut link the node is
//     reconnected and the upload continues from the part's size; the whole part is then checked
//     against the sha256 (a mismatch: uploaded again from byte 0, once);
//   - unpacked on the node with zstd and tar; a node without zstd (bare Debian has tar and gzip,
//     not zstd) gets this machine's zstd executable first (content-addressed under <root>/.tools).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "remote/deploy.h"
#include "remote/node.h"

namespace meshwork::remote {

struct BundleManifest {
  std::string archive_path;      // the local .tar.zst
  std::string sha256;            // of the archive: the bundle's address
  uint64_t archive_size = 0;
  std::string flavour;           // "cpu" or "cuda"
  std::string torch_version;
  std::string cuda_requirement;  // "13.2": the CUDA runtime the libraries need; "" for cpu
  std::string trainer = "meshtrain";
};

// The bundle of a flavour ("cpu" or "cuda") that came with this meshwork:
// <resource_dir()>/bundles/meshtrain-<flavour>.tar.zst when installed (the package carries the
// cpu one), else the build tree's bundles/ beside bin/ (scripts/build --target bundle-<flavour>).
std::string default_bundle_path(const std::string& flavour);

// Reads a bundle: `path` is the .tar.zst (its manifest is the .json beside it), the .json, or a
// flavour name, "cpu" or "cuda" (default_bundle_path). Checks that the archive exists with the
// manifest's size (the sha256 is checked on the node).
Result<BundleManifest> load_bundle(const std::string& path);

// Opens a fresh connection to node i (after its link was lost).
using Reconnect = std::function<std::variant<std::unique_ptr<Node>, ConnectError>(size_t index)>;

struct BundleDeployOptions {
  std::string root = ".cache/meshwork/bundles";  // relative to the login directory, or absolute
  Reconnect reconnect;        // unset: a lost link fails the node
  int max_attempts = 4;       // connections tried per node when links are lost
  std::string local_zstd;     // this machine's zstd, for nodes without one ("" = found in PATH)
};

struct BundleNodeResult {
  std::string dir;               // absolute <root>/<sha256> on the node (meshtrain is in it)
  uint64_t bytes_uploaded = 0;
  bool skipped = false;          // it was there already
  bool shared = false;           // another node of the same filesystem put it there
  std::string fsid;              // the bundle directory's id (equal ids: one filesystem)
  int reconnects = 0;
};

// Deploys the bundle to every node (threads, one per node). A node whose link is lost is
// reconnected with options.reconnect and nodes[i] replaced by the new connection.
std::vector<Result<BundleNodeResult>> deploy_bundle_all(std::vector<std::unique_ptr<Node>>& nodes,
                                                        const BundleManifest& bundle,
                                                        const BundleDeployOptions& options,
                                                        const DeployProgressFn& progress = {});

// One line for a bundle progress report, for the CLI and the workbench alike:
// "uploading 45.2 MiB of 130.0 MiB (35%), 120.3 MiB/s, ETA 1 s", "skipped: already there", ...
std::string bundle_progress_text(const DeployProgress& d);

}  // namespace meshwork::remote
