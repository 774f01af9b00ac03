// A tenant's images and mounts at submission, and its registry credentials: sealed, listed
// without their password, kept across a restart, opened only under the server's key.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>

#include "server/control_plane_test_fixture.h"
#include "server/secret_box.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
tenants:
  - name: lab
    images: {registries: ["registry.example.com/lab/"]}
    mounts: [{path: /data/imagenet, mode: ro}, {path: /checkpoints/lab, mode: rw}]
    queues: [{name: lab-q}]
  - name: other
    queues: [{name: other-q}]
users:
  - {name: tina, tenant: lab, role: tenant-admin}
  - {name: bob, tenant: lab, role: member}
  - {name: sam, tenant: other, role: member}
)";

std::unique_ptr<SecretBox> Box(uint8_t fill) {
  std::array<uint8_t, SecretBox::kKeyBytes> key{};
  key.fill(fill);
  return std::make_unique<SecretBox>(key);
}

class TenantBoundariesTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    StartWith(kConfig, "arbiter-boundaries");
    cp_->SetSecretBox(Box(1));
  }

  Status SubmitStatus(const json& extra) {
    json body = {{"queue", "lab-q"}, {"command", {"true"}}};
    for (const auto& [k, v] : extra.items()) body[k] = v;
    auto spec = api::ParseJobSubmission(body.dump());
    if (!spec.ok()) return spec.status();
    bool created = false;
    auto r = cp_->SubmitJob(admin_, std::move(spec).value(), "", &created);
    return r.ok() ? Status::Ok() : r.status();
  }

  Principal tina_{"tina", "lab", Role::kTenantAdmin, "t"};
  Principal bob_{"bob", "lab", Role::kMember, "b"};
  Principal sam_{"sam", "other", Role::kMember, "s"};
};

TEST_F(TenantBoundariesTest, ImagesAndMountsAreCheckedAgainstTheTenantsRules) {
  EXPECT_TRUE(SubmitStatus({{"container_image", "registry.example.com/lab/train:1"},
                            {"mounts",
                             {{{"path", "/data/imagenet"}, {"target", "/data"}},
                              {{"path", "/checkpoints/lab/run-1"}, {"mode", "rw"}}}}})
                  .ok());
  Status image = SubmitStatus({{"container_image", "ubuntu:22.04"}});
  EXPECT_EQ(image.field(), "container_image");
  EXPECT_EQ(image.message(),
            "ubuntu:22.04 is not from a registry tenant lab may use (registry.example.com/lab/)");
  Status outside = SubmitStatus(
      {{"container_image", "registry.example.com/lab/x"}, {"mounts", {{{"path", "/etc"}}}}});
  EXPECT_EQ(outside.field(), "mounts[0].path");
  EXPECT_EQ(outside.message(),
            "/etc is not under an allowed path of tenant lab (/data/imagenet ro, "
            "/checkpoints/lab rw)");
  Status write = SubmitStatus({{"container_image", "registry.example.com/lab/x"},
                               {"mounts", {{{"path", "/data/imagenet"}, {"mode", "rw"}}}}});
  EXPECT_EQ(write.field(), "mounts[0].mode");
  // Another tenant without rules: any image, no mounts.
  json body = {{"queue", "other-q"},
               {"command", {"true"}},
               {"container_image", "ubuntu:22.04"},
               {"mounts", {{{"path", "/data/imagenet"}}}}};
  auto spec = api::ParseJobSubmission(body.dump());
  ASSERT_TRUE(spec.ok());
  bool created = false;
  auto r = cp_->SubmitJob(sam_, *spec, "", &created);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "/data/imagenet is not under an allowed path of tenant other "
            "(none)");
  spec->mounts.clear();
  EXPECT_TRUE(cp_->SubmitJob(sam_, *spec, "", &created).ok());
}

TEST_F(TenantBoundariesTest, RegistryCredentialsAreSealedListedWithoutPasswordsAndSurvive) {
  // Who may set them.
  EXPECT_EQ(
      cp_->SetRegistryCredential(bob_, "", "registry.example.com/lab/", "u", "p").status().code(),
      StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->SetRegistryCredential(tina_, "other", "registry.example.com/", "u", "p")
                .status()
                .field(),
            "tenant");
  EXPECT_EQ(cp_->SetRegistryCredential(tina_, "", "https://reg.io", "u", "p").status().field(),
            "registry");
  EXPECT_EQ(cp_->SetRegistryCredential(tina_, "", "reg.io", "a:b", "p").status().field(), "user");
  auto set = cp_->SetRegistryCredential(tina_, "", "registry.example.com/lab/", "robot", "pw-1");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ((*set)["tenant"], "lab");
  EXPECT_FALSE(set->contains("password"));
  ASSERT_TRUE(
      cp_->SetRegistryCredential(admin_, "lab", "registry.example.com", "wide", "pw-2").ok());

  // Listed without the password; other tenants see none.
  auto listed = cp_->ListRegistryCredentials(bob_, "");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ((*listed)["items"].size(), 2u);
  EXPECT_EQ(listed->dump().find("pw-1"), std::string::npos);
  EXPECT_EQ((*cp_->ListRegistryCredentials(sam_, ""))["items"].size(), 0u);

  // The longest matching prefix is the one used; nothing for another tenant or registry.
  EXPECT_EQ(cp_->ImagePullAuth("lab", "registry.example.com/lab/train:1"), "robot:pw-1");
  EXPECT_EQ(cp_->ImagePullAuth("lab", "registry.example.com/nlp/x:1"), "wide:pw-2");
  EXPECT_EQ(cp_->ImagePullAuth("lab", "quay.io/x"), std::nullopt);
  EXPECT_EQ(cp_->ImagePullAuth("other", "registry.example.com/lab/train:1"), std::nullopt);

  // A restart with the same key keeps them; another key opens none.
  Start();
  cp_->SetSecretBox(Box(1));
  EXPECT_EQ(cp_->ImagePullAuth("lab", "registry.example.com/lab/train:1"), "robot:pw-1");
  Start();
  cp_->SetSecretBox(Box(2));
  EXPECT_EQ(cp_->ImagePullAuth("lab", "registry.example.com/lab/train:1"), std::nullopt);
  cp_->SetSecretBox(Box(1));

  // Deleted: gone, and audited.
  EXPECT_EQ(cp_->DeleteRegistryCredential(bob_, "", "registry.example.com/lab/").status().code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(cp_->DeleteRegistryCredential(tina_, "", "registry.example.com/lab/").ok());
  EXPECT_EQ(cp_->ImagePullAuth("lab", "registry.example.com/lab/train:1"), "wide:pw-2");
  EXPECT_EQ(cp_->DeleteRegistryCredential(tina_, "", "registry.example.com/lab/").status().code(),
            StatusCode::kNotFound);
  store::AuditQuery q;
  q.action = "registry_credential.set";
  auto audit = store_->QueryAudit(q);
  ASSERT_TRUE(audit.ok()) << audit.status().ToString();
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].detail_json.find("pw-"), std::string::npos);
}

}  // namespace
}  // namespace arbiter::server
