#include "http2/hpack_huffman.h"

#include <array>
#include <cstdint>

namespace tern::http2::huffman {
namespace {

constexpr int kSymbols = 257;  // the 256 byte values and EOS
constexpr int kEos = 256;

// Code lengths in bits, RFC 7541 Appendix B, by symbol; eight a line, the
// first symbol of each line on its right.
constexpr uint8_t kLengths[kSymbols] = {
    13, 23, 28, 28, 28, 28, 28, 28,  // 0
    28, 24, 30, 28, 28, 30, 28, 28,  // 8
    28, 28, 28, 28, 28, 28, 30, 28,  // 16
    28, 28, 28, 28, 28, 28, 28, 28,  // 24
    6,  10, 10, 12, 13, 6,  8,  11,  // 32 ' '
    10, 10, 8,  11, 8,  6,  6,  6,   // 40 '('
    5,  5,  5,  6,  6,  6,  6,  6,   // 48 '0'
    6,  6,  7,  8,  15, 6,  12, 10,  // 56 '8'
    13, 6,  7,  7,  7,  7,  7,  7,   // 64 '@'
    7,  7,  7,  7,  7,  7,  7,  7,   // 72 'H'
    7,  7,  7,  7,  7,  7,  7,  7,   // 80 'P'
    8,  7,  8,  13, 19, 13, 14, 6,   // 88 'X'
    15, 5,  6,  5,  6,  5,  6,  6,   // 96 '`'
    6,  5,  7,  7,  6,  6,  6,  5,   // 104 'h'
    6,  7,  6,  5,  5,  6,  7,  7,   // 112 'p'
    7,  7,  7,  15, 11, 14, 13, 28,  // 120 'x'
    20, 22, 20, 20, 22, 22, 22, 23,  // 128
    22, 23, 23, 23, 23, 23, 24, 23,  // 136
    24, 24, 22, 23, 24, 23, 23, 23,  // 144
    23, 21, 22, 23, 22, 23, 23, 24,  // 152
    22, 21, 20, 22, 22, 23, 23, 21,  // 160
    23, 22, 22, 24, 21, 22, 23, 23,  // 168
    21, 21, 22, 21, 23, 22, 23, 23,  // 176
    20, 22, 22, 22, 23, 22, 22, 23,  // 184
    26, 26, 20, 19, 22, 23, 22, 25,  // 192
    26, 26, 26, 27, 27, 26, 24, 25,  // 200
    19, 21, 26, 27, 27, 26, 27, 24,  // 208
    21, 21, 26, 26, 28, 27, 27, 27,  // 216
    20, 24, 20, 21, 22, 21, 21, 23,  // 224
    22, 22, 25, 25, 24, 24, 26, 23,  // 232
    26, 27, 26, 26, 27, 27, 27, 27,  // 240
    27, 28, 27, 27, 27, 27, 27, 26,  // 248
    30,                              // 256 EOS
};

constexpr int kMaxLength = 30;
constexpr int kMinLength = 5;  // so a 4-bit step completes at most one code

struct Code {
  uint32_t bits = 0;  // right-aligned
  uint8_t length = 0;
};

// Canonical assignment: within each length, symbols in order take
// consecutive codes; moving to the next length appends a zero bit.
constexpr std::array<Code, kSymbols> make_codes() {
  std::array<Code, kSymbols> codes{};
  uint64_t next = 0;
  for (int length = 1; length <= kMaxLength; ++length) {
    for (int sym = 0; sym < kSymbols; ++sym) {
      if (kLengths[sym] == length) codes[sym] = {static_cast<uint32_t>(next++), kLengths[sym]};
    }
    next <<= 1;
  }
  // A complete code uses every bit pattern: Kraft's sum is exactly one.
  if (next != uint64_t{1} << (kMaxLength + 1)) throw "incomplete code: a length is mistyped";
  return codes;
}

constexpr std::array<Code, kSymbols> kCodes = make_codes();

// Spot checks against the codes printed in Appendix B.
static_assert(kCodes[0].bits == 0x1ff8 && kCodes['0'].bits == 0x0 && kCodes['a'].bits == 0x3);
static_assert(kCodes[' '].bits == 0x14 && kCodes['~'].bits == 0x1ffd && kCodes[10].bits == 0x3ffffffc);
static_assert(kCodes[128].bits == 0xfffe6 && kCodes[255].bits == 0x3ffffee);
static_assert(kCodes[kEos].bits == 0x3fffffff);

// The code tree: 257 leaves hang from 256 internal nodes, node 0 the root.
// A child is an internal node (>= 0) or a leaf, -1 - symbol.
struct Tree {
  int16_t child[kSymbols - 1][2] = {};
  bool padding[kSymbols - 1] = {};  // path is all ones and at most 7 bits
};

constexpr Tree make_tree() {
  Tree tree;
  int nodes = 1;
  tree.padding[0] = true;
  for (int sym = 0; sym < kSymbols; ++sym) {
    const Code code = kCodes[sym];
    int node = 0;
    for (int bit = code.length - 1; bit > 0; --bit) {
      const int b = (code.bits >> bit) & 1;
      if (tree.child[node][b] == 0) {
        const int depth = code.length - bit;
        tree.padding[nodes] = tree.padding[node] && b == 1 && depth <= 7;
        tree.child[node][b] = static_cast<int16_t>(nodes++);
      }
      node = tree.child[node][b];
    }
    tree.child[node][code.bits & 1] = static_cast<int16_t>(-1 - sym);
  }
  if (nodes != kSymbols - 1) throw "not a full binary tree";
  return tree;
}

// One decoding step: from a state (an internal node, the bits read since
// the last symbol) through four input bits.
struct Step {
  uint8_t next;
  uint8_t flags;
  uint8_t symbol;  // with kEmit
  uint8_t unused;  // four bytes: one load a step
};
enum : uint8_t { kEmit = 1, kAccept = 2, kFail = 4 };

using StepTable = std::array<std::array<Step, 16>, kSymbols - 1>;

constexpr StepTable make_steps() {
  static_assert(kMinLength >= 5);
  constexpr Tree tree = make_tree();
  StepTable steps{};
  for (int state = 0; state < kSymbols - 1; ++state) {
    for (int nibble = 0; nibble < 16; ++nibble) {
      Step step{0, 0, 0, 0};
      int node = state;
      for (int bit = 3; bit >= 0; --bit) {
        const int child = tree.child[node][(nibble >> bit) & 1];
        if (child >= 0) {
          node = child;
          continue;
        }
        if (-1 - child == kEos) {
          step.flags = kFail;
          break;
        }
        step.flags |= kEmit;
        step.symbol = static_cast<uint8_t>(-1 - child);
        node = 0;
      }
      if (!(step.flags & kFail)) {
        step.next = static_cast<uint8_t>(node);
        if (tree.padding[node]) step.flags |= kAccept;
      }
      steps[state][nibble] = step;
    }
  }
  return steps;
}

constexpr StepTable kSteps = make_steps();

}  // namespace

size_t encoded_size(std::string_view s) {
  uint64_t bits = 0;
  for (unsigned char c : s) bits += kCodes[c].length;
  return static_cast<size_t>((bits + 7) / 8);
}

char* encode(std::string_view s, char* out) {
  // Codes gather in a 64-bit accumulator and leave 32 bits at a time: with
  // fewer than 32 pending, one more code (at most 30 bits) still fits.
  uint64_t acc = 0;
  unsigned pending = 0;
  for (unsigned char c : s) {
    acc = (acc << kCodes[c].length) | kCodes[c].bits;
    pending += kCodes[c].length;
    if (pending >= 32) {
      pending -= 32;
      const auto word = static_cast<uint32_t>(acc >> pending);
      out[0] = static_cast<char>(word >> 24);
      out[1] = static_cast<char>(word >> 16);
      out[2] = static_cast<char>(word >> 8);
      out[3] = static_cast<char>(word);
      out += 4;
    }
  }
  while (pending >= 8) {
    pending -= 8;
    *out++ = static_cast<char>(acc >> pending);
  }
  if (pending > 0) {
    const unsigned pad = 8 - pending;
    *out++ = static_cast<char>((acc << pad) | ((1u << pad) - 1));
  }
  return out;
}

// Two table steps a byte. The symbol is stored whether or not the step
// emits one (max_decoded_size leaves a byte for that), and failure is
// checked once at the end: a step after EOS restarts at the root, so the
// output stays within bounds. No branch depends on the data.
char* decode(std::string_view in, char* out) {
  unsigned state = 0;
  unsigned seen = 0;         // flags of every step, for kFail
  unsigned last = kAccept;   // flags of the last step; the empty string is valid
  for (unsigned char c : in) {
    Step step = kSteps[state][c >> 4];
    *out = static_cast<char>(step.symbol);
    out += step.flags & kEmit;
    seen |= step.flags;
    step = kSteps[step.next][c & 15];
    *out = static_cast<char>(step.symbol);
    out += step.flags & kEmit;
    seen |= step.flags;
    state = step.next;
    last = step.flags;
  }
  return (seen & kFail) || !(last & kAccept) ? nullptr : out;
}

}  // namespace tern::http2::huffman
