// The Huffman code of HPACK string literals (RFC 7541 section 5.2 and
// Appendix B).
//
// The code is canonical: codes follow from the 257 code lengths alone
// (symbols sorted by length, then by value, counted upwards). The .cc file
// types in only those lengths and derives, at compile time, the codes for
// the encoder and a state machine for the decoder that reads four bits a
// step; nothing is built at run time and there is no pasted table to
// disagree with the lengths.
//
// Pure functions on byte strings; any thread.
#pragma once

#include <cstddef>
#include <string_view>

namespace tern::http2::huffman {

// Bytes that encode(s) writes: its code bits rounded up to whole bytes.
size_t encoded_size(std::string_view s);

// Writes exactly encoded_size(s) bytes at out, padded with the high bits of
// EOS (ones) to a byte boundary. Returns the end of what it wrote.
char* encode(std::string_view s, char* out);

// Room decode() needs for `encoded` bytes of input: every code is at least
// 5 bits long, plus one byte it may write past its output.
constexpr size_t max_decoded_size(size_t encoded) { return encoded * 8 / 5 + 1; }

// Decodes `in` to out, which must have room for max_decoded_size(in.size())
// bytes. Returns the end of the output (the byte after it may have been
// written too), or nullptr when `in` is not a valid encoding: it contains
// EOS, or ends in padding that is not all ones or is longer than 7 bits
// (section 5.2 makes both a decoding error).
char* decode(std::string_view in, char* out);

}  // namespace tern::http2::huffman
