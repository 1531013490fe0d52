#pragma once
// Props: reading properties of a resource a BMC returned, tolerantly.
//
// BMCs put `null` where a value is unknown (HPE's iLO does it for Model,
// Status.State and dozens more), give numbers as strings, and leave out what
// the schema calls optional. None of that may abort an inspection: nlohmann's
// typed getters throw on a null, so inventory code reads every property
// through Props instead.
//
//  * missing            -> absent, silently (Redfish properties are optional);
//  * null, wrong type   -> absent, and the property's path is noted;
//  * a number given as a decimal string, where a number is wanted -> the number.
//
// Every string a BMC returns (names, serials, models, manufacturers: they
// reach the node's inventory, a tenant's view and the files the CLI writes)
// is cleaned where it enters, by kiln::printable_field
// (common/machine_values.h): control characters and invalid UTF-8 dropped,
// blank runs folded, cut to kMaxBmcText bytes. Cleaned rather than refused:
// a serial number with a stray byte is still worth showing, and a label
// must not fail an inspection. A cleaned property is named in a warning.
//
// The notes of one resource become one warning ("<uri>: null or wrongly typed:
// Model, Status.State; treated as absent") when flush() runs or the Props is
// destroyed, so the inventory says what could not be read without repeating
// itself per property.
//
// Thread: one Props per resource, used by one coroutine. It holds references:
// the resource and the warning list must outlive it. Never throws.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::redfish {

class Props {
 public:
  Props(const nlohmann::json& resource, std::string uri, std::vector<std::string>& warnings);
  ~Props();
  Props(const Props&) = delete;
  Props& operator=(const Props&) = delete;

  const nlohmann::json& resource() const { return r_; }
  const std::string& uri() const { return uri_; }

  // A string property, "" when absent; printable_field-cleaned (which also
  // trims the blanks BMCs pad fixed-width fields with). `path` is one key,
  // or "A.B" for a property of a nested object.
  std::string str(const char* path);
  // An integer (a JSON integer, a whole double, or a decimal string).
  std::optional<int64_t> integer(const char* path);
  // A number (JSON number or a decimal string).
  std::optional<double> number(const char* path);
  // A boolean.
  std::optional<bool> boolean(const char* path);
  // The @odata.id of a link object at `path`, "" when absent.
  std::string link(const char* path);
  // The @odata.id of every link in the array at `path` (a single link object
  // there is accepted as a one-element array: some BMCs do that).
  std::vector<std::string> links(const char* path);
  // An array of strings, each cleaned as str() (non-strings are skipped and
  // noted).
  std::vector<std::string> strings(const char* path);

  // Status.State == "Absent": the slot is empty.
  bool absent();

  // Writes the pending note as one warning.
  void flush();

 private:
  // The value at `path`, nullptr when missing or when a parent is not an
  // object (noted). A null value is returned as is: the caller notes it.
  const nlohmann::json* find(const char* path);
  void note(const char* path);
  // printable_field(raw), noting `path` when that changed more than blanks.
  std::string clean(const char* path, const std::string& raw);

  const nlohmann::json& r_;
  std::string uri_;
  std::vector<std::string>& warnings_;
  std::vector<std::string> noted_;
  std::vector<std::string> cleaned_;
};

// The longest string property kept (longer is cut): model names and serials
// are tens of bytes; Redfish's longest common ones (Description) fit.
inline constexpr std::size_t kMaxBmcText = 512;

// Lower-case copy.
std::string lower(std::string s);

}  // namespace kiln::redfish
