// Base64 (RFC 4648 section 4, the standard alphabet) decoding, for the
// credentials of an Authorization field: a table lookup a character, a few
// instructions each, where a constant-time decoder costs a hundred.
//
//   std::string out;
//   if (base64_decode("dXNlcjpwYXNz", &out)) -> out == "user:pass"
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

}  // namespace tern
