// The native tokenizer on a small hand-made byte-level BPE (ids derived by hand: ids 0-255 are
// the bytes themselves, see tokenizer_fixtures.h) and a smoke test on the real Qwen3 one. The
// exhaustive comparison with an independent implementation is the golden test.
#include <gtest/gtest.h>

#include <utf8proc.h>
#include <chrono>
#include <random>
#include <thread>

#include "tokenizer/byte_level.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "unit/helpers/tokenizer_fixtures.h"

namespace kipp {
namespace {

using Ids = std::vector<uint32_t>;
namespace small = testing::small;

const Tokenizer& small_tokenizer() {
  static const Tokenizer tokenizer = [] {
    auto created = Tokenizer::create(testing::small_tokenizer_metadata());
    if (!created.ok()) throw std::runtime_error(created.message());
    return std::move(created).value();
  }();
  return tokenizer;
}

Ids encode(std::string_view text, SpecialTokens mode = SpecialTokens::Parse) {
  auto ids = small_tokenizer().encode(text, mode);
  EXPECT_TRUE(ids.ok()) << ids.message();
  return ids.ok() ? *ids : Ids{};
}

// The byte tokens of `text` (what the small tokenizer gives when no merge applies).
Ids bytes_of(std::string_view text) {
  Ids ids;
  for (const char c : text) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

std::vector<std::string> split(std::string_view text) {
  static const Pretokenizer pretokenizer = std::move(Pretokenizer::create(kQwen2PretokenizerPattern)).value();
  std::vector<std::string_view> pieces;
  const Status status = pretokenizer.split(text, pieces);
  EXPECT_TRUE(status.ok()) << status.message();
  return {pieces.begin(), pieces.end()};
}

std::string cp(uint32_t code_point) {
  std::string out;
  utf8::append_code_point(code_point, out);
  return out;
}

std::string reference_nfc(const std::string& text) {
  utf8proc_uint8_t* result = nullptr;
  const auto n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  EXPECT_GE(n, 0);
  std::string out(reinterpret_cast<const char*>(result), static_cast<size_t>(n < 0 ? 0 : n));
  std::free(result);
  return out;
}

std::string error_of(std::string_view text) {
  auto ids = small_tokenizer().encode(text);
  EXPECT_FALSE(ids.ok());
  return ids.ok() ? std::string() : ids.message();
}

// ---- BPE -------------------------------------------------------------------------------

TEST(Tokenizer, MergesApplyInRankOrder) {
  // h e (rank 1) wins over l l (rank 3), so "hell"/"hello" (built from e+ll) never form.
  EXPECT_EQ(encode("hello"), (Ids{small::kHe, small::kLl, 'o'}));
  // Without the h, l l then e ll apply.
  EXPECT_EQ(encode("ello"), (Ids{small::kEll, 'o'}));
  EXPECT_EQ(encode("the the"), (Ids{'t', small::kHe, small::kSpaceThe}));
}

TEST(Tokenizer, EqualRankMergesGoLeftToRight) {
  EXPECT_EQ(encode("aaaaa"), (Ids{small::kAa, small::kAa, 'a'}));
  EXPECT_EQ(encode("aaaa"), (Ids{small::kAa, small::kAa}));
}

TEST(Tokenizer, EmptyText) { EXPECT_EQ(encode(""), Ids{}); }

TEST(Tokenizer, LongPiecesStayFast) {
  const auto start = std::chrono::steady_clock::now();
  Ids expected_a(50000, small::kAa);
  EXPECT_EQ(encode(std::string(100000, 'a')), expected_a);
  EXPECT_EQ(encode(std::string(200000, ' ')), Ids(100000, small::kSpaceSpace));
  EXPECT_EQ(encode(std::string(100000, '7')), Ids(100000, '7'));
  EXPECT_EQ(encode(std::string(100000, '!')), Ids(100000, '!'));
  EXPECT_EQ(encode(std::string(100000, '\n')), Ids(100000, '\n'));
  std::string mixed;
  for (int i = 0; i < 20000; ++i) mixed += "a \n\t!1";
  auto ids = small_tokenizer().encode(mixed);
  ASSERT_TRUE(ids.ok()) << ids.message();
  EXPECT_EQ(*small_tokenizer().decode(*ids), mixed);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0) << "long inputs must not go quadratic";
}

// ---- added tokens ----------------------------------------------------------------------

TEST(Tokenizer, AddedTokensAreLeftmostLongest) {
  EXPECT_EQ(encode("<|im_start|>"), Ids{small::kImStart});
  // "<|im" is a prefix of "<|im_start|>": the longer wins where both match, the shorter elsewhere.
  EXPECT_EQ(encode("<|im_end|>"), concat({{small::kIm}, bytes_of("_end|>")}));
  EXPECT_EQ(encode("x<think>y"), (Ids{'x', small::kThink, 'y'}));
  // "<think>" starts before the overlapping "think>x": leftmost wins even though not longer.
  EXPECT_EQ(encode("<think>x"), (Ids{small::kThink, 'x'}));
  EXPECT_EQ(encode("think>x"), Ids{small::kThinkX});
  EXPECT_EQ(encode("abc"), (Ids{small::kAb, 'c'}));
  EXPECT_EQ(encode("xbc"), (Ids{'x', small::kBc}));
  EXPECT_EQ(encode("<|im_start|><|im_start|>"), (Ids{small::kImStart, small::kImStart}));
}

TEST(Tokenizer, AddedTokensSplitTheTextBeforeThePreTokenizer) {
  // " the" would be one token; the added token cuts the space off the word.
  EXPECT_EQ(encode(" <think>the"), (Ids{' ', small::kThink, 't', small::kHe}));
}

TEST(Tokenizer, PlainTextModeIgnoresAddedTokens) {
  EXPECT_EQ(encode("<think>", SpecialTokens::PlainText), bytes_of("<think>"));
  EXPECT_EQ(encode("<|im_start|>", SpecialTokens::PlainText), bytes_of("<|im_start|>"));
  EXPECT_EQ(encode("ab", SpecialTokens::PlainText), bytes_of("ab"));
}

TEST(Tokenizer, AddedTokensMatchBeforeNormalization) {
  // NFC of the whole text would turn ">" + U+0338 into U+226F; the token is matched first and
  // the combining mark normalized on its own.
  const std::string text = "<think>" + cp(0x338);
  EXPECT_EQ(encode(text), concat({{small::kThink}, bytes_of(cp(0x338))}));
  EXPECT_EQ(encode(text, SpecialTokens::PlainText), concat({bytes_of("<think"), bytes_of(cp(0x226F))}));
}

TEST(Tokenizer, TokenKinds) {
  const Tokenizer& t = small_tokenizer();
  EXPECT_EQ(t.vocab_size(), small::kVocab);
  EXPECT_TRUE(t.is_special_token(small::kImStart));
  EXPECT_TRUE(t.is_added_token(small::kImStart));
  EXPECT_FALSE(t.is_special_token(small::kThink));
  EXPECT_TRUE(t.is_added_token(small::kThink));
  EXPECT_FALSE(t.is_added_token('a'));
  EXPECT_FALSE(t.is_added_token(small::kVocab));
  EXPECT_EQ(*t.token_to_piece(' '), "\xC4\xA0");  // "Ġ"
  EXPECT_EQ(*t.token_to_bytes(small::kSpaceThe), " the");
  EXPECT_EQ(*t.token_to_piece(small::kSpaceThe), "\xC4\xA0the");
  EXPECT_EQ(*t.token_to_bytes(small::kThink), "<think>");
  EXPECT_EQ(*t.token_to_piece(small::kUnused), "[PAD273]");
  EXPECT_EQ(*t.token_to_bytes(small::kUnused), "");
}

// ---- pre-tokenizer ---------------------------------------------------------------------

using Pieces = std::vector<std::string>;

TEST(Pretokenizer, EveryBranchOfTheQwen2Pattern) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("it's"), (Pieces{"it", "'s"}));
  EXPECT_EQ(split("HE'LL"), (Pieces{"HE", "'LL"}));
  EXPECT_EQ(split("x'Ll"), (Pieces{"x", "'Ll"}));
  EXPECT_EQ(split("we'VE'Re'D'M'T"), (Pieces{"we", "'VE", "'Re", "'D", "'M", "'T"}));
  // The contraction alternative comes first, so it wins even inside a longer word.
  EXPECT_EQ(split("x'Sthe"), (Pieces{"x", "'S", "the"}));
  EXPECT_EQ(split("abc123"), (Pieces{"abc", "1", "2", "3"}));
  EXPECT_EQ(split("_end"), (Pieces{"_end"}));
  EXPECT_EQ(split("a, b!!\n\nc"), (Pieces{"a", ",", " b", "!!\n\n", "c"}));
  EXPECT_EQ(split("x ...y"), (Pieces{"x", " ...", "y"}));
  EXPECT_EQ(split("a\n\n  b"), (Pieces{"a", "\n\n", " ", " b"}));
  EXPECT_EQ(split("a\r\n\r\nb"), (Pieces{"a", "\r\n\r\n", "b"}));
  EXPECT_EQ(split("a \n"), (Pieces{"a", " \n"}));
  EXPECT_EQ(split("a   "), (Pieces{"a", "   "}));
  EXPECT_EQ(split("\t\tx"), (Pieces{"\t", "\tx"}));
  EXPECT_EQ(split("    if x:\n        return"), (Pieces{"   ", " if", " x", ":\n", "       ", " return"}));
  EXPECT_EQ(split(""), Pieces{});
}

TEST(Pretokenizer, WhitespaceIsUnicodeWhiteSpace) {
  // Rust/Oniguruma `\s` = White_Space. A whitespace char X in "aXXb" gives a, X, Xb (the
  // lookahead leaves the last one to prefix the word); a non-space symbol gives a, XX, b.
  const uint32_t white_space[] = {0x09,   0x0B,   0x0C,   0x20,   0x85,   0xA0,   0x1680, 0x2000,
                                  0x2005, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  for (const uint32_t c : white_space) {
    const std::string x = cp(c);
    EXPECT_EQ(split("a" + x + x + "b"), (Pieces{"a", x, x + "b"})) << "U+" << std::hex << c;
  }
  // U+180E is in PCRE2's \s (it is in \h) but not White_Space; U+FEFF is in JavaScript's \s.
  const uint32_t not_white_space[] = {0x180E, 0xFEFF, 0x200B, 0x1C, 0x1F, 0x00AD};
  for (const uint32_t c : not_white_space) {
    const std::string x = cp(c);
    EXPECT_EQ(split("a" + x + x + "b"), (Pieces{"a", x + x, "b"})) << "U+" << std::hex << c;
  }
  const std::string nel = cp(0x85);
  EXPECT_EQ(split("a" + nel + "\nb"), (Pieces{"a", nel + "\n", "b"}));
}

TEST(Pretokenizer, ContractionsFoldCaseLikeTheReference) {
  // (?i)s matches U+017F LATIN SMALL LETTER LONG S by simple case folding.
  const std::string long_s = cp(0x17F);
  EXPECT_EQ(split("x'" + long_s + "t"), (Pieces{"x", "'" + long_s, "t"}));
  // Nothing else folds to the contraction letters; the Kelvin sign is just a letter.
  EXPECT_EQ(split("x'" + cp(0x212A) + "t"), (Pieces{"x", "'" + cp(0x212A) + "t"}));
}

TEST(Pretokenizer, RewriteLeavesNoPcre2WhitespaceClass) {
  const std::string rewritten = rewrite_whitespace_classes(kQwen2PretokenizerPattern);
  EXPECT_EQ(rewritten.find("\\s"), std::string::npos);
  EXPECT_EQ(rewritten.find("\\S"), std::string::npos);
  EXPECT_EQ(rewrite_whitespace_classes(R"(a\\s)"), R"(a\\s)");  // an escaped backslash, then "s"
  EXPECT_FALSE(Pretokenizer::create(R"([^\S])").ok());
}

TEST(Pretokenizer, PiecesCoverTheText) {
  std::mt19937 rng(7);
  const uint32_t pool[] = {'a',  'Z',  ' ',    '\n',   '\r',   '\t',  '1',     '\'',   's',   '!',
                           0x85, 0xA0, 0x180E, 0x3000, 0x4E2D, 0x301, 0x1F600, 0xFEFF, 0x17F, 0};
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int length = static_cast<int>(rng() % 24);
    for (int i = 0; i < length; ++i) text += cp(pool[rng() % std::size(pool)]);
    std::string joined;
    for (const auto& piece : split(text)) {
      EXPECT_FALSE(piece.empty());
      joined += piece;
    }
    EXPECT_EQ(joined, text);
  }
}

// ---- normalization ---------------------------------------------------------------------

TEST(Tokenizer, NormalizesToNfc) {
  EXPECT_EQ(encode("e" + cp(0x301)), bytes_of(cp(0xE9)));
  EXPECT_EQ(encode(cp(0xE9)), bytes_of(cp(0xE9)));
  EXPECT_EQ(encode(cp(0x1100) + cp(0x1161)), bytes_of(cp(0xAC00)));  // conjoining jamo -> syllable
  EXPECT_EQ(encode(cp(0x212B)), bytes_of(cp(0xC5)));                 // ANGSTROM SIGN -> Å
  EXPECT_EQ(encode(std::string("a\0b", 3)), bytes_of(std::string("a\0b", 3)));
}

TEST(Normalizer, InertCodePointsAreStableUnderNfc) {
  // The fast path skips utf8proc for text made only of these; check the claim per code point:
  // NFC leaves it alone, combining class 0 (no reordering), never second in a composition.
  std::string storage;
  for (uint32_t c = 0; c < 0x30000; ++c) {
    if (!is_nfc_inert(c)) continue;
    const utf8proc_property_t* property = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
    ASSERT_EQ(property->combining_class, 0) << std::hex << c;
    ASSERT_TRUE(property->comb_index == 0xFFFF || (property->comb_index & 0x8000) == 0) << std::hex << c;
    const std::string text = cp(c);
    ASSERT_EQ(reference_nfc(text), text) << std::hex << c;
  }
  EXPECT_EQ(nfc("abc", storage), "abc");
  EXPECT_EQ(nfc("e" + cp(0x301), storage), cp(0xE9));
}

TEST(Normalizer, PiecewiseNormalizationEqualsWholeText) {
  std::mt19937 rng(3);
  const uint32_t pool[] = {'a',    'e',    'A',    '>',     ' ',    0xE9,   0x300,  0x301,
                           0x323,  0x338,  0x1100, 0x1161,  0x11A8, 0xAC00, 0x3099, 0x304B,
                           0x212B, 0x2014, 0x201C, 0x1F600, 0x4E2D, 0xF900, 0x0B47, 0x0B3E};
  std::string storage;
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    const int length = static_cast<int>(rng() % 12);
    for (int i = 0; i < length; ++i) text += cp(pool[rng() % std::size(pool)]);
    ASSERT_EQ(std::string(nfc(text, storage)), reference_nfc(text)) << text;
  }
}

// ---- errors ----------------------------------------------------------------------------

TEST(Tokenizer, InvalidUtf8IsAnErrorWithTheByteOffset) {
  EXPECT_NE(error_of("ab\xFF"
                     "c")
                .find("byte offset 2 (byte 0xFF)"),
            std::string::npos)
      << error_of(
             "ab\xFF"
             "c");
  EXPECT_NE(error_of("x\xE2\x82").find("byte offset 1"), std::string::npos);                    // truncated
  EXPECT_NE(error_of("xy\xED\xA0\x80").find("byte offset 2"), std::string::npos);               // surrogate
  EXPECT_NE(error_of("\xC0\xAF").find("byte offset 0"), std::string::npos);                     // overlong
  EXPECT_NE(error_of("abcdefghij\xF4\x90\x80\x80").find("byte offset 10"), std::string::npos);  // > U+10FFFF
  EXPECT_NE(error_of("<think>\x80").find("byte offset 7"), std::string::npos);
  EXPECT_FALSE(small_tokenizer().encode("\xFF", SpecialTokens::PlainText).ok());
}

TEST(Tokenizer, UnknownIdsAreErrors) {
  const Tokenizer& t = small_tokenizer();
  const Ids ids = {'a', small::kVocab};
  auto decoded = t.decode(ids);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.message().find("unknown token id 274"), std::string::npos) << decoded.message();
  EXPECT_FALSE(t.token_to_bytes(99999).ok());
  EXPECT_FALSE(t.token_to_piece(99999).ok());
  IncrementalDecoder decoder(t);
  EXPECT_FALSE(decoder.push(99999).ok());
}

std::string create_error(const TokenizerMetadata& metadata) {
  auto created = Tokenizer::create(metadata);
  EXPECT_FALSE(created.ok());
  return created.ok() ? std::string() : created.message();
}

TEST(Tokenizer, CreateValidatesTheData) {
  auto m = testing::small_tokenizer_metadata();
  m.token_types.pop_back();
  EXPECT_NE(create_error(m).find("types"), std::string::npos);

  m = testing::small_tokenizer_metadata();
  m.merges.push_back("q z");
  EXPECT_NE(create_error(m).find("merge rank 11 'q z': the merged token 'qz'"), std::string::npos) << create_error(m);
  m = testing::small_tokenizer_metadata();
  m.merges.insert(m.merges.begin() + 2, "x nope");
  EXPECT_NE(create_error(m).find("merge rank 2 'x nope': 'nope' is not in the vocabulary"), std::string::npos);
  m = testing::small_tokenizer_metadata();
  m.merges.push_back("ab");
  EXPECT_NE(create_error(m).find("merge rank 11"), std::string::npos);
  m = testing::small_tokenizer_metadata();
  m.merges.push_back(m.merges[3]);
  EXPECT_NE(create_error(m).find("repeats merge rank 3"), std::string::npos);

  m = testing::small_tokenizer_metadata();
  m.tokens[small::kAa] = "a a";  // a raw space is not in the byte-level alphabet
  EXPECT_NE(create_error(m).find("token 263 'a a' is not a byte-level string"), std::string::npos) << create_error(m);

  m = testing::small_tokenizer_metadata();
  m.tokens[small::kThink] = "";
  EXPECT_NE(create_error(m).find("added token 269 is empty"), std::string::npos);

  m = testing::small_tokenizer_metadata();
  m.token_types['A'] = static_cast<int32_t>(TokenType::Unused);
  EXPECT_NE(create_error(m).find("byte 0x41"), std::string::npos) << create_error(m);

  m = testing::small_tokenizer_metadata();
  m.token_types[small::kUnused] = static_cast<int32_t>(TokenType::Byte);
  EXPECT_NE(create_error(m).find("has type 6"), std::string::npos);

  m = testing::small_tokenizer_metadata();
  m.tokens[small::kAa] = m.tokens['a'];
  EXPECT_NE(create_error(m).find("repeats token 97"), std::string::npos);

  m = testing::small_tokenizer_metadata();
  m.pre = "llama3";
  EXPECT_NE(create_error(m).find("llama3"), std::string::npos);
}

// ---- decoding --------------------------------------------------------------------------

// A random valid UTF-8 string drawn from the code points that exercise each stage.
std::string random_text(std::mt19937& rng) {
  static const uint32_t pool[] = {
      'a',    'b',    'c',    'e',    'h',    'l',    'o',    't',    's',    'S',     'x',     ' ',     ' ',
      '\n',   '\r',   '\t',   '1',    '9',    '\'',   '!',    '<',    '>',    '|',     '_',     0,       0x7F,
      0x85,   0xA0,   0xAD,   0xE9,   0x17F,  0x300,  0x301,  0x308,  0x338,  0x1100,  0x1161,  0x11A8,  0x180E,
      0x200D, 0x2028, 0x212B, 0x3000, 0x3099, 0x4E2D, 0xAC00, 0xFEFF, 0xFFFD, 0x1F600, 0x1F3FD, 0x1F468, 0x10FFFF};
  static const char* const fragments[] = {"<think>", "<|im_start|>", "<|im", "think>x", "ab", "bc", "'s", "hello"};
  std::string text;
  const int length = static_cast<int>(rng() % 32);
  for (int i = 0; i < length; ++i) {
    if (rng() % 8 == 0) {
      text += fragments[rng() % std::size(fragments)];
    } else {
      text += cp(pool[rng() % std::size(pool)]);
    }
  }
  return text;
}

TEST(Tokenizer, RoundTripIsNfcOfTheInput) {
  const Tokenizer& t = small_tokenizer();
  std::mt19937 rng(12345);
  for (int round = 0; round < 3000; ++round) {
    const std::string text = random_text(rng);
    auto plain = t.encode(text, SpecialTokens::PlainText);
    ASSERT_TRUE(plain.ok()) << plain.message();
    EXPECT_EQ(*t.decode(*plain), reference_nfc(text));
    // With added tokens the text is normalized piecewise around them: equal up to NFC.
    auto parsed = t.encode(text);
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    const std::string decoded = *t.decode(*parsed);
    EXPECT_EQ(reference_nfc(decoded), reference_nfc(text));
    // Streaming gives the same text.
    IncrementalDecoder decoder(t);
    std::string streamed;
    for (const uint32_t id : *parsed) streamed += *decoder.push(id);
    streamed += decoder.finish();
    EXPECT_EQ(streamed, decoded);
  }
}

TEST(IncrementalDecoder, HoldsIncompleteCharactersAtEverySplitPoint) {
  const Tokenizer& t = small_tokenizer();
  // 1-, 2-, 3- and 4-byte characters, an emoji with skin tone and a ZWJ family.
  const std::string text = "a" + cp(0xE9) + cp(0x20AC) + cp(0x1F600) + "b" + cp(0x1F44D) + cp(0x1F3FD) + cp(0x1F468) +
                           cp(0x200D) + cp(0x1F469) + "c";
  // Every byte a token of its own: each byte boundary is a split point.
  IncrementalDecoder decoder(t);
  std::string streamed;
  for (const char c : text) {
    auto piece = decoder.push(static_cast<uint8_t>(c));
    ASSERT_TRUE(piece.ok());
    EXPECT_FALSE(utf8::first_invalid_byte(*piece).has_value()) << "emitted a broken character";
    streamed += *piece;
  }
  EXPECT_EQ(decoder.finish(), "");
  EXPECT_EQ(streamed, text);
  // Through the encoder, whose F0 9F merge ends mid-character.
  auto ids = t.encode(text);
  ASSERT_TRUE(ids.ok());
  EXPECT_NE(std::find(ids->begin(), ids->end(), small::kEmojiHead), ids->end());
  IncrementalDecoder second(t);
  streamed.clear();
  for (const uint32_t id : *ids) {
    auto piece = second.push(id);
    ASSERT_TRUE(piece.ok());
    EXPECT_FALSE(utf8::first_invalid_byte(*piece).has_value());
    streamed += *piece;
  }
  EXPECT_EQ(streamed + second.finish(), text);
}

TEST(IncrementalDecoder, FinishFlushesAnIncompleteTail) {
  const Tokenizer& t = small_tokenizer();
  IncrementalDecoder decoder(t);
  EXPECT_EQ(*decoder.push(0xE2), "");
  EXPECT_EQ(*decoder.push(0x82), "");
  EXPECT_EQ(decoder.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(decoder.finish(), "");  // nothing left; the decoder can be reused
  EXPECT_EQ(*decoder.push('x'), "x");
}

TEST(IncrementalDecoder, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer& t = small_tokenizer();
  IncrementalDecoder decoder(t);
  EXPECT_EQ(*decoder.push(0xFF), "\xEF\xBF\xBD");
  EXPECT_EQ(*decoder.push(0x80), "\xEF\xBF\xBD");  // a stray continuation byte
  EXPECT_EQ(*decoder.push(0xE2), "");
  EXPECT_EQ(*decoder.push('A'),
            "\xEF\xBF\xBD"
            "A");  // the truncated sequence is one U+FFFD
  EXPECT_EQ(*decoder.push(0xE0), "");
  EXPECT_EQ(*decoder.push(0x80), "\xEF\xBF\xBD\xEF\xBF\xBD");  // E0 80 is never valid: two subparts
  EXPECT_EQ(*decoder.push(small::kThink), "<think>");
  EXPECT_EQ(*decoder.push(small::kUnused), "");
}

TEST(Utf8, LossyConversionUsesMaximalSubparts) {
  std::string out;
  EXPECT_EQ(utf8::append_lossy("a\xF0\x9F\x98"
                               "b\xED\xA0\x80",
                               false, out),
            8u);
  // F0 9F 98 is one subpart; ED A0 80 is three (A0 cannot follow ED).
  EXPECT_EQ(out,
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(ByteLevel, AlphabetIsTheGpt2Map) {
  EXPECT_EQ(byte_level::byte_to_code_point(' '), 0x120u);
  EXPECT_EQ(byte_level::byte_to_code_point('!'), 0x21u);
  EXPECT_EQ(byte_level::byte_to_code_point(0), 0x100u);
  EXPECT_EQ(byte_level::byte_to_code_point('\n'), 0x10Au);
  EXPECT_EQ(byte_level::byte_to_code_point(0x7F), 0x121u);
  EXPECT_EQ(byte_level::byte_to_code_point(0xAD), 0x143u);
  EXPECT_EQ(byte_level::byte_to_code_point(0xFF), 0xFFu);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(byte_level::decode(byte_level::encode(all)), all);
  EXPECT_FALSE(byte_level::decode(" ").has_value());
  EXPECT_FALSE(byte_level::decode(cp(0x4E2D)).has_value());
}

TEST(Tokenizer, ConcurrentEncodersAgree) {
  const Tokenizer& t = small_tokenizer();
  std::mt19937 rng(99);
  std::vector<std::string> texts;
  for (int i = 0; i < 500; ++i) texts.push_back(random_text(rng));
  std::vector<Ids> expected;
  for (const auto& text : texts) expected.push_back(*t.encode(text));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int repeat = 0; repeat < 5; ++repeat) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (*t.encode(texts[(i + static_cast<size_t>(w) * 97) % texts.size()]) !=
              expected[(i + static_cast<size_t>(w) * 97) % texts.size()]) {
            ++mismatches[w];
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// ---- the real Qwen3 tokenizer ----------------------------------------------------------

const Tokenizer& qwen_tokenizer() {
  static const Expected<Tokenizer> tokenizer = []() -> Expected<Tokenizer> {
    auto metadata = testing::qwen_tokenizer_metadata(KIPP_SOURCE_DIR);
    if (!metadata.ok()) return metadata.error();
    return Tokenizer::create(*metadata);
  }();
  if (!tokenizer.ok()) {
    ADD_FAILURE() << "the real Qwen3 tokenizer is required and could not be loaded: " << tokenizer.message();
    throw std::runtime_error(tokenizer.message());
  }
  return *tokenizer;
}

Ids qwen(std::string_view text, SpecialTokens mode = SpecialTokens::Parse) {
  auto ids = qwen_tokenizer().encode(text, mode);
  EXPECT_TRUE(ids.ok()) << ids.message();
  return ids.ok() ? *ids : Ids{};
}

TEST(QwenTokenizer, KnownIds) {
  EXPECT_EQ(qwen("Hello world"), (Ids{9707, 1879}));
  EXPECT_EQ(qwen("<|im_start|>"), Ids{151644});
  EXPECT_EQ(qwen("<|im_end|>"), Ids{151645});
  EXPECT_EQ(qwen("<|endoftext|>"), Ids{151643});
  EXPECT_EQ(qwen("<think>"), Ids{151667});
  EXPECT_EQ(qwen("</think>"), Ids{151668});
  EXPECT_EQ(qwen("<tool_response>"), Ids{151665});
  EXPECT_EQ(qwen("<|im_start|>user\nHi<|im_end|>").front(), 151644u);
  EXPECT_EQ(qwen("<|im_start|>user\nHi<|im_end|>").back(), 151645u);
  EXPECT_EQ(qwen(""), Ids{});
}

TEST(QwenTokenizer, PlainTextModeSplitsSpecialTokens) {
  const Tokenizer& t = qwen_tokenizer();
  for (const char* text : {"<think>", "<|im_start|>", "<tool_response>"}) {
    const Ids ids = qwen(text, SpecialTokens::PlainText);
    EXPECT_GT(ids.size(), 1u) << text;
    for (const uint32_t id : ids) EXPECT_FALSE(t.is_added_token(id)) << text;
    EXPECT_EQ(*t.decode(ids), text);
  }
}

TEST(QwenTokenizer, VocabularyPiecesMatchTheirIds) {
  const Tokenizer& t = qwen_tokenizer();
  EXPECT_EQ(t.vocab_size(), 151936u);
  EXPECT_EQ(*t.token_to_piece(9707), "Hello");
  EXPECT_EQ(*t.token_to_piece(1879), "\xC4\xA0world");
  EXPECT_EQ(*t.token_to_bytes(1879), " world");
  EXPECT_TRUE(t.is_special_token(151644));
  EXPECT_FALSE(t.is_special_token(151667));
  EXPECT_TRUE(t.is_added_token(151667));
  EXPECT_EQ(*t.token_to_bytes(151900), "");  // a padding slot
  // Each single-piece encoding of a vocabulary word is that word's id (the tokens below are
  // their own BPE result: every merge on the way exists).
  for (const uint32_t id : {9707u, 1879u, 279u, 198u, 271u}) {
    const std::string bytes = *t.token_to_bytes(id);
    EXPECT_EQ(qwen(bytes), Ids{id}) << "id " << id << " '" << bytes << "'";
  }
}

TEST(QwenTokenizer, RoundTripsMultilingualText) {
  const Tokenizer& t = qwen_tokenizer();
  const std::string texts[] = {
      "The quick brown fox jumps over the lazy dog. It's 2024; we'll see 123456789!",
      "def f(x):\n    return x ** 2  # square\n\n\nclass A:\r\n\tpass\n",
      "日本語のテキストと中文文本，한국어 텍스트, العربية, हिन्दी, ไทย",
      "emoji 👍🏽 👨‍👩‍👧 🇩🇪 and e" + cp(0x301) + " NFD",
      std::string(5000, 'x') + " " + std::string(3000, ' ') + "end",
  };
  for (const std::string& text : texts) {
    const Ids ids = qwen(text);
    EXPECT_EQ(*t.decode(ids), reference_nfc(text));
    IncrementalDecoder decoder(t);
    std::string streamed;
    for (const uint32_t id : ids) streamed += *decoder.push(id);
    EXPECT_EQ(streamed + decoder.finish(), reference_nfc(text));
  }
}

}  // namespace
}  // namespace kipp
