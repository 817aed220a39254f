#include "fetchd/hub/repo_listing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fetchd/request/fetch_error.h"

namespace fetchd::hub {
namespace {

using ::testing::HasSubstr;

const std::string kSha = "AB23" + std::string(60, '0') + "";

std::string integrity_error(const std::string& json) {
  try {
    check_listing_integrity(parse_tree_page(json, "org/repo"), "org/repo");
  } catch (const FetchError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Integrity);
    return e.what();
  }
  return "";
}

TEST(RepoListing, ParsesFilesSkipsDirectoriesAndLowercasesIds) {
  const auto entries = parse_tree_page(R"([
    {"type":"directory","oid":"d","size":0,"path":"original"},
    {"type":"file","oid":"ABCDEF0123","size":12,"path":"config.json"},
    {"type":"file","oid":"1111","size":100,"path":"model.safetensors",
     "lfs":{"oid":"FEDCBA","size":100,"pointerSize":134},"xetHash":"AA11"},
    {"type":"file","oid":"2222","path":"nosize.txt"},
    {"type":"file","oid":"3333","size":5,"path":"masked.bin","xetHash":")" +
                                           std::string(64, '*') + R"("}
  ])",
                                       "org/repo");
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].path, "config.json");
  EXPECT_EQ(entries[0].oid, "abcdef0123");
  EXPECT_FALSE(entries[0].is_lfs());
  EXPECT_EQ(entries[0].blob_id(), "abcdef0123");
  EXPECT_EQ(entries[1].lfs_oid, "fedcba");
  EXPECT_EQ(entries[1].blob_id(), "fedcba");
  EXPECT_EQ(entries[1].content_size(), 100u);
  EXPECT_EQ(entries[1].xet_hash, "aa11");
  EXPECT_FALSE(entries[2].size);
  EXPECT_FALSE(entries[3].xet_hash);  // masked counts as not given
}

TEST(RepoListing, RefusesPathsThatLeaveTheRepository) {
  for (const char* path : {"../evil", "/etc/passwd", "a\\\\b", "a//b", "a/../../b"}) {
    try {
      parse_tree_page(std::string(R"([{"type":"file","oid":"1","size":1,"path":")") + path + "\"}]", "org/repo");
      ADD_FAILURE() << "accepted " << path;
    } catch (const FetchError& e) {
      EXPECT_THAT(e.what(), HasSubstr("could reach outside")) << path;
    }
  }
  EXPECT_THROW(parse_tree_page("{", "org/repo"), FetchError);
  EXPECT_THROW(parse_tree_page("{}", "org/repo"), FetchError);
}

TEST(RepoListing, RefusesOneIdAtTwoSizes) {
  const auto error = integrity_error(R"([
    {"type":"file","oid":")" + kSha + R"(","size":4096,"path":"a.bin"},
    {"type":"file","oid":")" + kSha + R"(","size":2048,"path":"b.bin"}])");
  EXPECT_THAT(error, HasSubstr("the tree listing for repository 'org/repo' gives object identifier ab2300000000"));
  EXPECT_THAT(error, HasSubstr("to 'a.bin' at 4096 bytes and to 'b.bin' at 2048 bytes"));
  EXPECT_THAT(error, HasSubstr("One content hash cannot name two different sizes. The listing is not usable."));
}

TEST(RepoListing, ComparesIdsAfterLowercasing) {
  EXPECT_THAT(integrity_error(R"([{"type":"file","oid":"ABC1","size":1,"path":"a"},
                                  {"type":"file","oid":"abc1","size":2,"path":"b"}])"),
              HasSubstr("two different sizes"));
}

TEST(RepoListing, RefusesLfsIdsAtTwoSizes) {
  EXPECT_THAT(integrity_error(R"([
    {"type":"file","oid":"p1","size":10,"path":"a.safetensors","lfs":{"oid":"beef","size":10}},
    {"type":"file","oid":"p2","size":11,"path":"b.safetensors","lfs":{"oid":"BEEF","size":11}}])"),
              HasSubstr("object identifier beef"));
}

TEST(RepoListing, RefusesARepeatedCharacterId) {
  const auto error = integrity_error(R"([{"type":"file","oid":"p","size":10,"path":"model.safetensors",
    "lfs":{"oid":")" + std::string(64, 'a') +
                                     R"(","size":10}}])");
  EXPECT_THAT(error, HasSubstr("gives 'model.safetensors' the object identifier aaaaaaaaaaaa"));
  EXPECT_THAT(error, HasSubstr("whose 64 characters are all 'a'"));
  EXPECT_THAT(integrity_error(R"([{"type":"file","oid":")" + std::string(40, '0') + R"(","size":1,"path":"x"}])"),
              HasSubstr("all '0'"));
}

TEST(RepoListing, AcceptsDuplicateContentAtTheSameSize) {
  EXPECT_EQ(integrity_error(R"([{"type":"file","oid":"abc","size":7,"path":"a"},
                                {"type":"file","oid":"ABC","size":7,"path":"b"}])"),
            "");
}

TEST(RepoListing, AnEntryWithoutSizeCannotSwitchTheCheckOff) {
  EXPECT_THAT(integrity_error(R"([{"type":"file","oid":"abc","path":"first"},
                                  {"type":"file","oid":"abc","size":1,"path":"a"},
                                  {"type":"file","oid":"abc","size":2,"path":"b"}])"),
              HasSubstr("'a' at 1 bytes and to 'b' at 2 bytes"));
  EXPECT_EQ(
      integrity_error(R"([{"type":"file","oid":"abc","path":"a"},{"type":"file","oid":"abc","size":2,"path":"b"}])"),
      "");
}

TEST(RepoListing, ZeroIsASizeNotAnAbsentOne) {
  EXPECT_THAT(integrity_error(R"([{"type":"file","oid":"abc","size":0,"path":"a"},
                                  {"type":"file","oid":"abc","size":3,"path":"b"}])"),
              HasSubstr("at 0 bytes"));
}

TEST(RepoListing, RefusesOnePathAtTwoSizes) {
  EXPECT_THAT(integrity_error(R"([{"type":"file","oid":"a1","size":1,"path":"x"},
                                  {"type":"file","oid":"b2","size":2,"path":"x"}])"),
              HasSubstr("lists 'x' twice, at 1 and 2 bytes"));
}

// Two entries for one path: which would the snapshot hold, and which id would prove it? Refused even when
// the sizes agree.
TEST(RepoListing, RefusesOnePathListedTwice) {
  EXPECT_THAT(integrity_error(R"([{"type":"file","oid":"a1","size":5,"path":"x"},
                                  {"type":"file","oid":"b2","size":5,"path":"x"}])"),
              HasSubstr("lists 'x' twice."));
  EXPECT_THAT(integrity_error(R"([{"type":"file","oid":"a1","path":"x"},{"type":"file","oid":"a1","path":"x"}])"),
              HasSubstr("lists 'x' twice."));
}

// A path becomes a snapshot file name and a word in log lines: control characters and bytes that are not
// UTF-8 are refused, and the refusal itself prints them escaped.
TEST(RepoListing, RefusesPathsWithControlCharacters) {
  for (const std::string path :
       {R"(mod\nel\r\u001b[31m.safetensors)", R"(a\tb)", R"(x\u007f)", R"(c1\u009b2J)", R"(nul\u0000.bin)"}) {
    std::string message;
    try {
      parse_tree_page(R"([{"type":"file","oid":"a1","size":1,"path":")" + path + R"("}])", "org/repo");
    } catch (const FetchError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Integrity);
      message = e.what();
    }
    EXPECT_THAT(message, HasSubstr("control character")) << path;
    for (const char c : message) {
      EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << "raw control byte in: " << message;
    }
  }
  EXPECT_THAT(
      [] {
        try {
          parse_tree_page("[{\"type\":\"file\",\"path\":\"mod\\nel\\u001b[31m\"}]", "org/repo");
        } catch (const FetchError& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("'mod\\nel\\x1b[31m'"));
  // Printable UTF-8 beyond ASCII is a file name like any other.
  EXPECT_EQ(parse_tree_page(R"([{"type":"file","oid":"a1","size":1,"path":"modèle/日本.json"}])", "org/repo").size(),
            1u);
}

}  // namespace
}  // namespace fetchd::hub
