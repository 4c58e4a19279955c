#include "events/digest.hpp"

#include <openssl/evp.h>

namespace weightd::events {

std::string to_hex(const unsigned char* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 0xf];
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr);
  return to_hex(out, len);
}

struct sha256_stream::context {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
};

sha256_stream::sha256_stream() : ctx_(new context) { EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr); }

sha256_stream::~sha256_stream() {
  EVP_MD_CTX_free(ctx_->md);
  delete ctx_;
}

void sha256_stream::update(const void* data, size_t n) { EVP_DigestUpdate(ctx_->md, data, n); }

std::string sha256_stream::hex() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_->md, out, &len);
  EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr);
  return to_hex(out, len);
}

}  // namespace weightd::events
