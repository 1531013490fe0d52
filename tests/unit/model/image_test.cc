// controller/model/image.h served_file(): what the agent is told it downloads.
// A qcow2 is served as the raw+sparse file kilnd converted it to; one an older
// kilnd converted to raw+zstd (a ".raw.zst" file) keeps being served as that,
// so an upgrade never hands the agent a stream under the wrong format name.

#include <catch2/catch.hpp>

#include "controller/model/image.h"
#include "controller/model/image_use.h"

using kiln::Image;
using kiln::served_file;

TEST_CASE("served_file: a qcow2 is served as its converted file, named by the format it was converted to") {
  Image img;
  img.format = "qcow2";
  img.sha256 = "source";
  img.size = 100;
  img.path = "/images/x.qcow2";
  img.served_sha256 = "served";
  img.served_size = 200;
  img.served_path = "/data/images/qcow2-abc" + std::string(kiln::kConvertedSuffix);
  auto s = served_file(img);
  CHECK(s.format == "raw+sparse");
  CHECK(s.sha256 == "served");
  CHECK(s.size == 200);
  CHECK(s.path == img.served_path);

  img.served_path = "/data/images/qcow2-abc" + std::string(kiln::kLegacyConvertedSuffix);
  CHECK(served_file(img).format == "raw+zstd");
}

TEST_CASE("served_file: raw formats are served as registered") {
  Image img;
  img.format = "raw+gzip";
  img.sha256 = "s";
  img.size = 7;
  img.path = "/images/a.gz";
  auto s = served_file(img);
  CHECK(s.format == "raw+gzip");
  CHECK(s.sha256 == "s");
  CHECK(s.path == "/images/a.gz");
  img.format = "";
  CHECK(served_file(img).format == "raw");
}

TEST_CASE("image use: a tenant sees public images only, staff sees all, only os images deploy", "[model][image]") {
  kiln::Image pub;
  pub.id = "11111111-1111-1111-1111-111111111111";
  pub.name = "debian";
  pub.kind = "os";
  pub.is_public = true;
  kiln::Image priv = pub;
  priv.is_public = false;
  kiln::Image ramdisk = pub;
  ramdisk.kind = "ramdisk";

  CHECK_FALSE(kiln::image_use_refusal(&pub, "debian", false));
  CHECK_FALSE(kiln::image_use_refusal(&pub, "debian", true));
  CHECK_FALSE(kiln::image_use_refusal(&priv, "debian", true));
  // A private image is as unknown to a tenant as a missing one: the same words.
  CHECK(kiln::image_use_refusal(&priv, "debian", false) == std::optional<std::string>("no such image: debian"));
  CHECK(kiln::image_use_refusal(nullptr, "debian", false) == std::optional<std::string>("no such image: debian"));
  CHECK(kiln::image_use_refusal(nullptr, "debian", true) == std::optional<std::string>("no such image: debian"));
  CHECK(kiln::image_use_refusal(&ramdisk, "ipa", true) ==
        std::optional<std::string>("must be an os image; ipa is a ramdisk image"));
}
