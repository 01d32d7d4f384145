#pragma once
// Stores kept as single files: a store folder (FORMAT, blobs/, peak.db) packed as NAME.tar.xz
// (`store.tar.xz` or `*-store.tar.xz`, members at the top level), or a lone database as
// NAME.db.xz. Results committed this way stay small (the blobs of many stores compress into a
// few percent of their size); reading one unpacks it once into the user's cache, keyed by the
// archive's content, and opens that folder.
#include <filesystem>

#include "util/result.h"

namespace peak {

// Whether `path` is named as a store archive (store.tar.xz, *-store.tar.xz, *.db.xz).
bool is_store_archive(const std::filesystem::path& path);

// `path` itself when it exists (a folder named `store` only when it holds peak.db or
// peak.db.xz); else the archive that holds it (DIR/store and DIR/store/peak.db
// -> DIR/store.tar.xz, X.db -> X.db.xz) when that exists; else `path`.
std::filesystem::path store_or_archive(const std::filesystem::path& path);

// The folder holding the unpacked store (peak.db, and FORMAT and blobs/ when the archive has
// them): $PEAK_CACHE_DIR, $XDG_CACHE_HOME/peak or ~/.cache/peak (else the temp folder), under
// stores/<content hash>. Unpacked once; a folder being unpacked by another process is never
// read half-written (unpacked beside it, then renamed).
Result<std::filesystem::path> unpack_store_archive(const std::filesystem::path& archive);

// The store at `store` (a folder with FORMAT, blobs/ and peak.db or peak.db.xz, or an archive
// of one, found as store_or_archive finds it) copied into `peak_dir` (a workspace's .peak
// folder, created when missing), so that a workspace can continue from it.
Status copy_store(const std::filesystem::path& store, const std::filesystem::path& peak_dir);

}  // namespace peak
