// Base64 (RFC 4648 section 4, the standard alphabet) decoding, for the
// credentials of an Authorization field: a table lookup a character, a few
// instructions each, where a constant-time decoder costs a hundred. And
// base64url (section 5, without padding) encoding, for the JSON Web
// Signatures of ACME.
//
//   std::string out;
//   if (base64_decode("dXNlcjpwYXNz", &out)) -> out == "user:pass"
//   base64url_encode("\xfb\xff") == "-_8"
#pragma once

#include <string>
#include <string_view>

namespace tern {

// Decodes `text` into *out (replacing what it held); '=' padding to a
// multiple of four characters, or none. False, *out unspecified, when
// `text` holds anything else: a character outside the alphabet, padding
// within the text or of the wrong length, bits left over in the last
// character.
bool base64_decode(std::string_view text, std::string* out);

// `bytes` in the URL and file name safe alphabet ('-' and '_' for '+' and
// '/'), without '=' padding (RFC 7515 section 2).
std::string base64url_encode(std::string_view bytes);
// base64url back to bytes, as base64_decode() does the standard alphabet
// (padding allowed or not; '+' and '/' refused).
bool base64url_decode(std::string_view text, std::string* out);

}  // namespace tern
