#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fetchd::hub {

// One file of a repository's tree listing at one commit.
struct ListingEntry {
  std::string path;
  std::optional<std::uint64_t> size;   // absent when the hub did not report one (0 is a real size)
  std::string oid;                     // git blob id, lower-cased; empty when not given
  std::optional<std::string> lfs_oid;  // SHA-256 of the content for LFS files, lower-cased
  std::optional<std::uint64_t> lfs_size;
  std::optional<std::string> xet_hash;  // absent when not given or masked

  bool is_lfs() const { return lfs_oid.has_value(); }
  // The blob name huggingface_hub uses: the LFS SHA-256, else the git oid; empty when neither is known.
  std::string blob_id() const { return lfs_oid ? *lfs_oid : oid; }
  std::optional<std::uint64_t> content_size() const { return lfs_size ? lfs_size : size; }
};

// Parses one page of `GET /api/models/{repo}/tree/{rev}?recursive=true`: directories are skipped, oids
// lower-cased, a masked xetHash ("****…") counts as absent. Throws FetchError(Integrity) for malformed
// JSON or a path that could leave the cache (.., leading /, backslash, empty component).
std::vector<ListingEntry> parse_tree_page(std::string_view json, std::string_view repo_id);

// The entries in the tree API's own JSON shape, so parse_tree_page reads them back.
std::string listing_to_json(const std::vector<ListingEntry>& entries);

// Refuses a listing the hub cannot be telling the truth about: one object id at two different sizes (or
// one path twice at two sizes), or an id made of a single repeated character. Duplicate content (same id,
// same size) is fine; an entry without a size never owns an id. Throws FetchError(Integrity).
void check_listing_integrity(const std::vector<ListingEntry>& entries, std::string_view repo_id);

}  // namespace fetchd::hub
