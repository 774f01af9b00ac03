#include "server/secret_box.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace arbiter::server {

namespace {

constexpr std::string_view kPrefix = "v1:";
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

std::string Base64(const std::vector<uint8_t>& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool Unbase64(std::string_view text, std::vector<uint8_t>* out) {
  if (text.empty() || text.size() % 4 != 0) return false;
  out->assign(3 * text.size() / 4, 0);
  const int n = EVP_DecodeBlock(out->data(), reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t len = static_cast<size_t>(n);
  if (text.back() == '=') --len;
  if (text.size() >= 2 && text[text.size() - 2] == '=') --len;
  out->resize(len);
  return true;
}

}  // namespace

Result<SecretBox> SecretBox::LoadOrCreate(const std::string& path) {
  std::array<uint8_t, kKeyBytes> key{};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st {};
    const bool stat_ok = ::fstat(fd, &st) == 0;
    // One byte more than a key, to tell a longer file from a key.
    std::array<uint8_t, kKeyBytes + 1> buf{};
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    ::close(fd);
    std::memcpy(key.data(), buf.data(), kKeyBytes);
    if (!stat_ok || n != static_cast<ssize_t>(kKeyBytes)) {
      return FailedPrecondition(
          fmt::format("secret key {}: must hold exactly {} bytes", path, kKeyBytes));
    }
    if ((st.st_mode & 077) != 0) {
      return FailedPrecondition(fmt::format(
          "secret key {}: readable by others (mode {:o}); chmod 600 it", path, st.st_mode & 0777));
    }
    return SecretBox(key);
  }
  if (errno != ENOENT) {
    return FailedPrecondition(
        fmt::format("secret key {}: cannot read it: {}", path, std::strerror(errno)));
  }
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
    return Internal("secret key: the random source failed");
  }
  const int out = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0) {
    return FailedPrecondition(
        fmt::format("secret key {}: cannot create it: {}", path, std::strerror(errno)));
  }
  const bool written = ::write(out, key.data(), key.size()) == static_cast<ssize_t>(key.size());
  const bool synced = ::fsync(out) == 0;
  ::close(out);
  if (!written || !synced) {
    ::unlink(path.c_str());
    return FailedPrecondition(fmt::format("secret key {}: cannot write it", path));
  }
  return SecretBox(key);
}

Result<std::string> SecretBox::Seal(std::string_view plaintext, std::string_view context) const {
  std::vector<uint8_t> out(kNonceBytes + plaintext.size() + kTagBytes);
  if (RAND_bytes(out.data(), static_cast<int>(kNonceBytes)) != 1) {
    return Internal("seal: the random source failed");
  }
  Ctx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  uint8_t* cipher = out.data() + kNonceBytes;
  if (!ctx ||
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), out.data()) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len,
                        reinterpret_cast<const unsigned char*>(context.data()),
                        static_cast<int>(context.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), cipher, &len,
                        reinterpret_cast<const unsigned char*>(plaintext.data()),
                        static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), cipher + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes),
                          cipher + plaintext.size()) != 1) {
    return Internal("seal: AES-256-GCM failed");
  }
  return std::string(kPrefix) + Base64(out);
}

Result<std::string> SecretBox::Open(std::string_view sealed, std::string_view context) const {
  std::vector<uint8_t> in;
  if (sealed.substr(0, kPrefix.size()) != kPrefix ||
      !Unbase64(sealed.substr(kPrefix.size()), &in) || in.size() < kNonceBytes + kTagBytes) {
    return FailedPrecondition("open: not a sealed value");
  }
  const size_t n = in.size() - kNonceBytes - kTagBytes;
  std::string plain(n, '\0');
  Ctx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  const uint8_t* cipher = in.data() + kNonceBytes;
  std::array<uint8_t, kTagBytes> tag{};
  std::memcpy(tag.data(), cipher + n, kTagBytes);
  if (!ctx ||
      EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), in.data()) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len,
                        reinterpret_cast<const unsigned char*>(context.data()),
                        static_cast<int>(context.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len, cipher,
                        static_cast<int>(n)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes),
                          tag.data()) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + len, &len) !=
          1) {
    return FailedPrecondition(
        "open: the value does not open under this key (another server's key, or altered)");
  }
  return plain;
}

}  // namespace arbiter::server
