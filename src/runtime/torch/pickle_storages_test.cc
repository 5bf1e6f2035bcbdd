// ScanPickleStorages on hand-built pickles: the persistent ids a TorchScript
// data.pkl declares, through memo puts and gets, and clear refusals of
// malformed input (what the fuzz target feeds it by the million).
#include "runtime/torch/pickle_storages.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace somm {
namespace {

std::string U32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}
std::string Unicode(const std::string& text) { return "X" + U32(static_cast<uint32_t>(text.size())) + text; }

// The shape torch writes: ('storage', torch.FloatStorage, '0', 'cpu', numel),
// then a second storage that reuses the memoized 'storage', type and 'cpu'.
std::string TwoStorages(const std::string& first_numel) {
  std::string p = "\x80\x02";
  p += "(" + Unicode("storage") + "q\x01" + "ctorch\nFloatStorage\nq\x02" + Unicode("0") +
       Unicode("cpu") + "q\x03" + first_numel + "tQ";
  p += "(h\x01h\x02" + Unicode("1") + "h\x03" + "K\x0atQ";
  p += "0.";  // POP the second's result, STOP
  return p;
}

std::vector<PickledStorage> Scan(const std::string& pickle, Status* status) {
  std::vector<PickledStorage> out;
  *status = ScanPickleStorages(pickle, [&](const PickledStorage& s) {
    out.push_back(s);
    return Status::Ok();
  });
  return out;
}

TEST(PickleStoragesTest, ReadsEveryStorageThroughTheMemo) {
  Status status;
  const auto storages = Scan(TwoStorages(std::string("M\x00\x40", 3)), &status);  // 16384
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(storages.size(), 2u);
  EXPECT_EQ(storages[0].type, "FloatStorage");
  EXPECT_EQ(storages[0].key, "0");
  EXPECT_EQ(storages[0].location, "cpu");
  EXPECT_EQ(storages[0].numel, 16384);
  EXPECT_EQ(storages[1].type, "FloatStorage");
  EXPECT_EQ(storages[1].key, "1");
  EXPECT_EQ(storages[1].location, "cpu");
  EXPECT_EQ(storages[1].numel, 10);
}

TEST(PickleStoragesTest, ReadsWideAndLongCounts) {
  Status status;
  auto storages = Scan(TwoStorages("J" + U32(0x7fffffff)), &status);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(storages[0].numel, 0x7fffffff);
  // LONG1 of 5 bytes: 2^32 + 1; and a negative BININT.
  storages = Scan(TwoStorages(std::string("\x8a\x05\x01\x00\x00\x00\x01", 7)), &status);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(storages[0].numel, (int64_t{1} << 32) + 1);
  storages = Scan(TwoStorages("J" + U32(0xffffffff)), &status);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(storages[0].numel, -1);
}

TEST(PickleStoragesTest, ACallbackRefusalStopsTheScan) {
  int calls = 0;
  const Status s = ScanPickleStorages(TwoStorages("K\x01"), [&](const PickledStorage&) {
    ++calls;
    return InvalidArgument("too big");
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("too big"), std::string::npos) << s.ToString();
}

TEST(PickleStoragesTest, MalformedPicklesAreRefusedWithWhere) {
  const std::string good = TwoStorages("K\x01");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "without STOP"},
      {good.substr(0, good.size() - 1), "without STOP"},
      {good.substr(0, 20), "unterminated line"},
      {good.substr(0, 12), "truncated"},
      {"\x80\x02X\xff\xff\xff\x7f" "abc.", "truncated"},
      {"t.", "no MARK"},
      {"0.", "underflow"},
      {"h\x07.", "never put"},
      {"\x80\x02(K\x01tQ.", "persistent id"},
      {"\x80\x02(" + Unicode("storage") + Unicode("x") + Unicode("0") + Unicode("cpu") + "K\x01tQ.",
       "wrong kinds"},
      {"\x80\x02P0\n.", "unsupported opcode"},
      {"\xff.", "unsupported opcode"},
      {"cmodule-without-newline", "unterminated"},
  };
  for (const auto& [pickle, expect] : cases) {
    Status status;
    Scan(pickle, &status);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << expect;
    EXPECT_NE(status.message().find(expect), std::string::npos) << status.ToString();
    if (expect != "without STOP") {
      EXPECT_NE(status.message().find("byte"), std::string::npos) << status.ToString();
    }
  }
}

TEST(PickleStoragesTest, MemoryStaysBoundedOnAHostilePickle) {
  // A megabyte string put in the memo, then gotten and DUPed a million
  // times: the items share it (this would be a terabyte of copies).
  std::string p = "\x80\x02" + Unicode(std::string(1 << 20, 'x')) + std::string("q\x00", 2);
  for (int i = 0; i < 100000; ++i) p += std::string("h\x00" "200", 5);
  p += ".";
  Status status;
  Scan(p, &status);
  EXPECT_TRUE(status.ok()) << status.ToString();
  // A stack deeper than the bound is refused, not grown.
  std::string deep = "\x80\x02" + std::string(2 << 20, 'N') + ".";
  Scan(deep, &status);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("stack deeper"), std::string::npos) << status.ToString();
}

TEST(PickleStoragesTest, ItemSizes) {
  EXPECT_EQ(StorageItemSize("FloatStorage"), 4);
  EXPECT_EQ(StorageItemSize("BFloat16Storage"), 2);
  EXPECT_EQ(StorageItemSize("QInt8Storage"), 1);
  EXPECT_EQ(StorageItemSize("LongStorage"), 8);
  EXPECT_EQ(StorageItemSize("NoSuchStorage"), 0);
}

}  // namespace
}  // namespace somm
