#pragma once
// CatalogueStore: what nodes are deployed with and validated against: OS
// images (controller/boot owns them; sql/images.cc) and hardware profiles
// (sql/profiles.cc). Small catalogues: no paging.
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk I/O.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "controller/model/image.h"
#include "controller/model/validation.h"

namespace kiln {

class CatalogueStore {
 public:
  virtual ~CatalogueStore() = default;

  // Inserts `image` (id, created_at filled when empty; updated_at = now).
  // kConflict naming "/name" when the name is taken; kInvalidArgument for an
  // empty or UUID-looking name.
  virtual Result<Image> create_image(const Image& image) = 0;
  // By UUID, or by name when `id_or_name` is not a UUID. kNotFound.
  virtual Result<Image> get_image(std::string_view id_or_name) = 0;
  // Every image, oldest first (a catalogue is small: no paging).
  virtual Result<std::vector<Image>> list_images() = 0;
  // kNotFound when absent. The file it served is the caller's to remove.
  virtual Status delete_image(std::string_view id_or_name) = 0;
  // Writes what a download, upload or conversion learnt of the image
  // `image.id` (`state`, `path`, `last_error`, `virtual_size` and the
  // `served_*` fields) and returns the image as stored. kNotFound.
  virtual Result<Image> update_image(const Image& image) = 0;
  // Lists the image (by id or name) to tenants, or stops listing it; returns
  // the image as stored. A separate write from update_image so a download
  // finishing at the same time cannot undo it. kNotFound.
  virtual Result<Image> set_image_public(std::string_view id_or_name, bool is_public) = 0;

  // Inserts `profile` (created_at = updated_at = now, version 1; doc["name"]
  // is set to profile.name). kConflict naming "/name" when the name is taken.
  virtual Result<Profile> create_profile(const Profile& profile) = 0;
  // kNotFound.
  virtual Result<Profile> get_profile(std::string_view name) = 0;
  // Every profile, by name (a catalogue is small: no paging).
  virtual Result<std::vector<Profile>> list_profiles() = 0;
  // Replaces the document of the profile `profile.name` (version+1,
  // updated_at = now). kNotFound; kPreconditionFailed when `expected_version`
  // is set and differs.
  virtual Result<Profile> replace_profile(const Profile& profile, std::optional<int64_t> expected_version) = 0;
  // kNotFound; kConflict when nodes still name it (the count in the message).
  virtual Status delete_profile(std::string_view name) = 0;
  // Creates each of `defaults` that was never seeded before and whose name
  // is free, remembering it as seeded: a default an operator edited is kept,
  // one an operator deleted stays deleted. Returns the names created.
  virtual Result<std::vector<std::string>> seed_profiles(const std::vector<Profile>& defaults) = 0;
};

}  // namespace kiln
