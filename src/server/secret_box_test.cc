#include "server/secret_box.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace arbiter::server {
namespace {

// A folder of its own under TMPDIR, removed at the end.
class KeyDir {
 public:
  KeyDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/secret-box-XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~KeyDir() {
    ::unlink((path_ + "/secret.key").c_str());
    ::rmdir(path_.c_str());
  }
  std::string key() const { return path_ + "/secret.key"; }

 private:
  std::string path_;
};

SecretBox Box(uint8_t fill) {
  std::array<uint8_t, SecretBox::kKeyBytes> key{};
  key.fill(fill);
  return SecretBox(key);
}

TEST(SecretBoxTest, OpensWhatItSealedUnderTheSameContext) {
  const SecretBox box = Box(7);
  for (const std::string& plain : {std::string(""), std::string("p"), std::string(1000, 'x')}) {
    auto sealed = box.Seal(plain, "vision/registry.example.com");
    ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
    EXPECT_EQ(sealed->rfind("v1:", 0), 0u);
    if (plain.size() > 8) {  // a short one may appear in base64 by chance
      EXPECT_EQ(sealed->find(plain), std::string::npos);
    }
    auto opened = box.Open(*sealed, "vision/registry.example.com");
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_EQ(*opened, plain);
  }
  // A fresh nonce each time: the same secret seals differently.
  EXPECT_NE(*box.Seal("same", "c"), *box.Seal("same", "c"));
}

TEST(SecretBoxTest, RefusesAnotherKeyAnotherContextAndAlteredText) {
  const SecretBox box = Box(7);
  const std::string sealed = *box.Seal("hunter2", "vision/reg");
  EXPECT_FALSE(Box(8).Open(sealed, "vision/reg").ok());
  EXPECT_FALSE(box.Open(sealed, "speech/reg").ok());
  std::string altered = sealed;
  altered[10] = altered[10] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(box.Open(altered, "vision/reg").ok());
  EXPECT_FALSE(box.Open("v1:", "vision/reg").ok());
  EXPECT_FALSE(box.Open("hunter2", "vision/reg").ok());
}

TEST(SecretBoxTest, TheKeyFileIsMadeOnceWithMode0600AndReadBack) {
  KeyDir dir;
  auto first = SecretBox::LoadOrCreate(dir.key());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  struct stat st {};
  ASSERT_EQ(::stat(dir.key().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  const std::string sealed = *first->Seal("pw", "ctx");
  auto again = SecretBox::LoadOrCreate(dir.key());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again->Open(sealed, "ctx"), "pw");

  // A key others may read is refused, and so is one of the wrong size.
  ::chmod(dir.key().c_str(), 0644);
  auto open_to_all = SecretBox::LoadOrCreate(dir.key());
  ASSERT_FALSE(open_to_all.ok());
  EXPECT_NE(open_to_all.status().message().find("chmod 600"), std::string::npos);
  ::chmod(dir.key().c_str(), 0600);
  std::ofstream(dir.key(), std::ios::trunc) << "short";
  EXPECT_FALSE(SecretBox::LoadOrCreate(dir.key()).ok());
}

}  // namespace
}  // namespace arbiter::server
