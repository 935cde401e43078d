// SHA-256: the FIPS 180-4 example messages, the padding edges (55, 56, 63, 64 bytes) and a
// fixture file's digest as sha256sum prints it.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"
#include "trainer/tokenizer/sha256.h"

namespace trainer::tokenizer {
namespace {

TEST(Sha256, StandardExamples) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),  // 56 bytes
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex(std::string(63, 'x')),
            "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2");
  EXPECT_EQ(sha256_hex(std::string(64, 'x')),
            "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
}

TEST(Sha256, FixtureFileAsSha256sumPrintsIt) {
  EXPECT_EQ(sha256_hex(testing::read_text(testing::fixture("small_gpt2_merges.txt"))),
            "8742d0c529a8fa0f6d9607ff8d5670d4778f4dcacef0f868b9a03a1152042d8e");
}

}  // namespace
}  // namespace trainer::tokenizer
