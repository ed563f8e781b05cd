// base64_decode() against libsodium's decoder: the same answer (accepted
// or refused, and the same bytes) for every text tried, padded as RFC 4648
// writes it or without padding; base64url_encode() against its encoder.
#include "base/base64.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <optional>
#include <random>
#include <string>
#include <utility>

namespace tern {
namespace {

std::optional<std::string> sodium_decode(std::string_view text, int variant) {
  std::string out(text.size() / 4 * 3 + 3, '\0');
  size_t length = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(),
                        nullptr, &length, &end, variant) != 0 ||
      end != text.data() + text.size()) {
    return std::nullopt;
  }
  out.resize(length);
  return out;
}

std::optional<std::string> ours(std::string_view text) {
  std::string out = "left over";
  if (!base64_decode(text, &out)) return std::nullopt;
  return out;
}

std::string encode(std::string_view bytes, int variant) {
  std::string out(sodium_base64_encoded_len(bytes.size(), variant), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                    variant);
  out.resize(out.size() - 1);  // the NUL
  return out;
}

TEST(Base64, DecodesWhatIsEncodedPaddedOrNot) {
  ASSERT_GE(sodium_init(), 0);
  std::mt19937 random(7);
  for (size_t size = 0; size < 64; ++size) {
    std::string bytes(size, '\0');
    for (char& b : bytes) b = static_cast<char>(random());
    EXPECT_EQ(ours(encode(bytes, sodium_base64_VARIANT_ORIGINAL)), bytes) << size;
    EXPECT_EQ(ours(encode(bytes, sodium_base64_VARIANT_ORIGINAL_NO_PADDING)), bytes) << size;
  }
  EXPECT_EQ(ours("dXNlcjpwYXNzd29yZA=="), "user:password");
  EXPECT_EQ(ours(""), "");
}

TEST(Base64, RefusesWhatLibsodiumRefuses) {
  ASSERT_GE(sodium_init(), 0);
  // Texts of characters near the edges of the alphabet, '=' and a few
  // outside it, of every length up to 12. (Not bytes above 0x7f: the
  // libsodium of Debian 12 decodes "\x80AZb" to three bytes without
  // padding.)
  const std::string kChars = "AZaz09+/=-_ \n.Bb";
  std::mt19937 random(11);
  for (int i = 0; i < 200'000; ++i) {
    std::string text(random() % 13, '\0');
    for (char& c : text) c = kChars[random() % kChars.size()];
    const bool padded = text.size() % 4 == 0 && text.find('=') != std::string::npos;
    const int variant = padded || text.size() % 4 == 0 ? sodium_base64_VARIANT_ORIGINAL
                                                       : sodium_base64_VARIANT_ORIGINAL_NO_PADDING;
    EXPECT_EQ(ours(text), sodium_decode(text, variant)) << '"' << text << '"';
  }
}

TEST(Base64, RefusesPaddingOutOfPlaceAndBitsLeftOver) {
  for (const char* text : {"=", "A", "AB=", "A===", "====", "AB=C", "ABC=D", "AB==AB==", "QQ=", "QR==", "QUJ=",
                           "Q Q==", "QQ==\n", "Q\x80==", "\xc1\xc1\xc1\xc1"}) {
    EXPECT_EQ(ours(text), std::nullopt) << text;
  }
  EXPECT_EQ(ours("QQ=="), "A");
  EXPECT_EQ(ours("QQ"), "A");
  EXPECT_EQ(ours("QUI="), "AB");
  EXPECT_EQ(ours("QUI"), "AB");
}

TEST(Base64Url, EncodesAsLibsodiumsUrlSafeVariantWithoutPadding) {
  ASSERT_GE(sodium_init(), 0);
  // RFC 4648's vectors, then random bytes of every length up to 64.
  const std::pair<std::string_view, std::string_view> vectors[] = {
      {"", ""}, {"f", "Zg"}, {"fo", "Zm8"}, {"foo", "Zm9v"}, {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"},
      {"foobar", "Zm9vYmFy"}, {"\xfb\xff", "-_8"}};
  for (const auto& [bytes, text] : vectors) EXPECT_EQ(base64url_encode(bytes), text);
  std::mt19937 random(7);
  for (size_t size = 0; size <= 64; ++size) {
    std::string bytes(size, '\0');
    for (char& b : bytes) b = static_cast<char>(random());
    EXPECT_EQ(base64url_encode(bytes), encode(bytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING)) << size;
    std::string back = "left over";
    EXPECT_TRUE(base64url_decode(base64url_encode(bytes), &back));
    EXPECT_EQ(back, bytes);
  }
  std::string out;
  EXPECT_FALSE(base64url_decode("+_8", &out));  // one alphabet or the other
  EXPECT_FALSE(base64url_decode("-/8", &out));
}

}  // namespace
}  // namespace tern
