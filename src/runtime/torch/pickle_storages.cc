#include "runtime/torch/pickle_storages.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace somm {
namespace {

// One value on the modelled stack. Only what a persistent id can hold is
// kept; everything else is kOther.
struct Item {
  enum Kind { kOther, kString, kGlobal, kInt, kTuple } kind = kOther;
  // kString: the string; kGlobal: "module name". Shared: memo puts, gets
  // and DUP copy items, and a hostile pickle can do so a million times.
  std::shared_ptr<const std::string> text;
  int64_t number = 0;
  // kTuple: its items, kept only for short tuples (a persistent id has 5).
  std::shared_ptr<const std::vector<Item>> items;
};

constexpr size_t kKeptTupleItems = 8;
// Bounds that no model's pickle comes near, so that memory stays small
// whatever the input: strings longer than this are not kept (a persistent
// id's are short), and deeper stacks or larger memos are refused.
constexpr size_t kKeptStringBytes = 4096;
constexpr size_t kMaxStackItems = 1 << 20;
constexpr size_t kMaxMemoItems = 1 << 22;

class Walker {
 public:
  Walker(std::string_view p, const std::function<Status(const PickledStorage&)>& storage)
      : p_(p), storage_(storage) {}

  Status Run() {
    while (pos_ < p_.size()) {
      const size_t at = pos_;
      const auto op = static_cast<unsigned char>(p_[pos_++]);
      Status s = Step(op);
      if (s.ok() && overflow_) s = InvalidArgument("stack deeper than " + std::to_string(kMaxStackItems));
      if (!s.ok()) return InvalidArgument("pickle at byte " + std::to_string(at) + ": " + s.message());
      if (stopped_) return Status::Ok();
    }
    return InvalidArgument("pickle ends without STOP");
  }

 private:
  Status Need(size_t n) {
    if (p_.size() - pos_ < n) return InvalidArgument("truncated argument");
    return Status::Ok();
  }
  uint64_t Unsigned(size_t n) {  // little-endian, Need(n) checked
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }
  Status Length(size_t width, uint64_t* out) {
    SOMM_RETURN_IF_ERROR(Need(width));
    *out = Unsigned(width);
    if (*out > p_.size() - pos_) return InvalidArgument("truncated argument");
    return Status::Ok();
  }
  static Item Text(Item::Kind kind, std::string text) {
    Item i;
    i.kind = kind;
    i.text = std::make_shared<const std::string>(std::move(text));
    return i;
  }
  Status Line(std::string* out) {
    const size_t end = p_.find('\n', pos_);
    if (end == std::string_view::npos) return InvalidArgument("unterminated line");
    *out = std::string(p_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return Status::Ok();
  }
  void Push(Item item) {
    if (stack_.size() >= kMaxStackItems) {
      overflow_ = true;
      return;
    }
    stack_.push_back(std::move(item));
  }
  Status Pop(size_t n) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) return InvalidArgument("stack underflow");
    stack_.resize(stack_.size() - n);
    return Status::Ok();
  }
  Status Top(Item** out) {
    if (stack_.empty()) return InvalidArgument("stack underflow");
    *out = &stack_.back();
    return Status::Ok();
  }
  // The items since the last MARK, which is dropped.
  Status PopMark(std::vector<Item>* items) {
    if (marks_.empty()) return InvalidArgument("no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    if (items) items->assign(std::make_move_iterator(stack_.begin() + mark), std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return Status::Ok();
  }
  static Item Tuple(std::vector<Item> items) {
    Item t;
    t.kind = Item::kTuple;
    if (items.size() <= kKeptTupleItems) t.items = std::make_shared<const std::vector<Item>>(std::move(items));
    return t;
  }
  Status PopTuple(size_t n) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) return InvalidArgument("stack underflow");
    std::vector<Item> items(std::make_move_iterator(stack_.end() - static_cast<std::ptrdiff_t>(n)),
                            std::make_move_iterator(stack_.end()));
    stack_.resize(stack_.size() - n);
    Push(Tuple(std::move(items)));
    return Status::Ok();
  }
  Status Put(uint64_t index) {
    Item* top = nullptr;
    SOMM_RETURN_IF_ERROR(Top(&top));
    if (memo_.size() >= kMaxMemoItems && memo_.count(index) == 0) {
      return InvalidArgument("memo larger than " + std::to_string(kMaxMemoItems));
    }
    memo_[index] = *top;
    return Status::Ok();
  }
  Status Get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return InvalidArgument("memo " + std::to_string(index) + " was never put");
    Push(it->second);
    return Status::Ok();
  }
  Status String(size_t width) {
    uint64_t n = 0;
    SOMM_RETURN_IF_ERROR(Length(width, &n));
    Item s = n <= kKeptStringBytes ? Text(Item::kString, std::string(p_.substr(pos_, n))) : Item{};
    pos_ += n;
    Push(std::move(s));
    return Status::Ok();
  }
  Status Skip(size_t width) {  // a length-prefixed argument pushed as kOther
    uint64_t n = 0;
    SOMM_RETURN_IF_ERROR(Length(width, &n));
    pos_ += n;
    Push(Item{});
    return Status::Ok();
  }
  Status Int(size_t width) {
    SOMM_RETURN_IF_ERROR(Need(width));
    uint64_t raw = Unsigned(width);
    Item i;
    i.kind = Item::kInt;
    if (width == 4) {
      i.number = static_cast<int32_t>(raw);
    } else {
      i.number = static_cast<int64_t>(raw);  // 1 and 2 bytes are unsigned
    }
    Push(std::move(i));
    return Status::Ok();
  }
  Status Long(size_t width) {
    uint64_t n = 0;
    SOMM_RETURN_IF_ERROR(Length(width, &n));
    Item i;
    if (n <= 8) {
      uint64_t raw = Unsigned(static_cast<size_t>(n));
      if (n > 0 && n < 8 && (raw >> (8 * n - 1)) & 1) raw |= ~uint64_t{0} << (8 * n);  // sign
      i.kind = Item::kInt;
      i.number = static_cast<int64_t>(raw);
    } else {
      pos_ += n;  // too long for int64: not an element count we accept
    }
    Push(std::move(i));
    return Status::Ok();
  }
  Status PersistentId() {
    Item* top = nullptr;
    SOMM_RETURN_IF_ERROR(Top(&top));
    const Item pid = *top;
    SOMM_RETURN_IF_ERROR(Pop(1));
    Push(Item{});
    const std::vector<Item>* t = pid.kind == Item::kTuple ? pid.items.get() : nullptr;
    if (t == nullptr || t->size() != 5 || (*t)[0].kind != Item::kString ||
        *(*t)[0].text != "storage") {
      return InvalidArgument("a persistent id that is not ('storage', type, key, location, numel)");
    }
    const Item& type = (*t)[1];
    const Item& key = (*t)[2];
    const Item& location = (*t)[3];
    const Item& numel = (*t)[4];
    if (type.kind != Item::kGlobal || type.text->rfind("torch ", 0) != 0 ||
        key.kind != Item::kString || location.kind != Item::kString || numel.kind != Item::kInt) {
      return InvalidArgument("a storage persistent id with fields of the wrong kinds");
    }
    PickledStorage s;
    s.type = type.text->substr(6);
    s.key = *key.text;
    s.location = *location.text;
    s.numel = numel.number;
    return storage_(s);
  }

  Status Step(unsigned char op) {
    switch (op) {
      case 0x80:  // PROTO
        SOMM_RETURN_IF_ERROR(Need(1));
        pos_ += 1;
        return Status::Ok();
      case 0x95:  // FRAME
        SOMM_RETURN_IF_ERROR(Need(8));
        pos_ += 8;
        return Status::Ok();
      case 'c': {  // GLOBAL
        std::string module, name;
        SOMM_RETURN_IF_ERROR(Line(&module));
        SOMM_RETURN_IF_ERROR(Line(&name));
        Push(Text(Item::kGlobal, module + " " + name));
        return Status::Ok();
      }
      case 0x93: {  // STACK_GLOBAL
        if (stack_.size() < 2) return InvalidArgument("stack underflow");
        const Item name = stack_.back();
        const Item module = stack_[stack_.size() - 2];
        SOMM_RETURN_IF_ERROR(Pop(2));
        Push(module.kind == Item::kString && name.kind == Item::kString
                 ? Text(Item::kGlobal, *module.text + " " + *name.text)
                 : Item{});
        return Status::Ok();
      }
      case 'X':  // BINUNICODE
      case 'T':  // BINSTRING
        return String(4);
      case 0x8c:  // SHORT_BINUNICODE
      case 'U':   // SHORT_BINSTRING
        return String(1);
      case 0x8d:  // BINUNICODE8
        return String(8);
      case 'B':  // BINBYTES
        return Skip(4);
      case 'C':  // SHORT_BINBYTES
        return Skip(1);
      case 0x8e:  // BINBYTES8
      case 0x96:  // BYTEARRAY8
        return Skip(8);
      case 'J':  // BININT
        return Int(4);
      case 'K':  // BININT1
        return Int(1);
      case 'M':  // BININT2
        return Int(2);
      case 0x8a:  // LONG1
        return Long(1);
      case 0x8b:  // LONG4
        return Long(4);
      case 'G':  // BINFLOAT
        SOMM_RETURN_IF_ERROR(Need(8));
        pos_ += 8;
        Push(Item{});
        return Status::Ok();
      case 'N':   // NONE
      case 0x88:  // NEWTRUE
      case 0x89:  // NEWFALSE
      case ']':   // EMPTY_LIST
      case '}':   // EMPTY_DICT
      case 0x8f:  // EMPTY_SET
        Push(Item{});
        return Status::Ok();
      case ')':  // EMPTY_TUPLE
        Push(Tuple({}));
        return Status::Ok();
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return Status::Ok();
      case 't': {  // TUPLE
        std::vector<Item> items;
        SOMM_RETURN_IF_ERROR(PopMark(&items));
        Push(Tuple(std::move(items)));
        return Status::Ok();
      }
      case 0x85:  // TUPLE1
        return PopTuple(1);
      case 0x86:  // TUPLE2
        return PopTuple(2);
      case 0x87:  // TUPLE3
        return PopTuple(3);
      case 'l':   // LIST
      case 'd':   // DICT
      case 0x91:  // FROZENSET
      case 'o':   // OBJ
        SOMM_RETURN_IF_ERROR(PopMark(nullptr));
        Push(Item{});
        return Status::Ok();
      case 'e':   // APPENDS
      case 'u':   // SETITEMS
      case 0x90:  // ADDITEMS
      case '1':   // POP_MARK
        return PopMark(nullptr);
      case 'a':  // APPEND
      case 'b':  // BUILD
      case '0':  // POP
        return Pop(1);
      case 's':  // SETITEM
        return Pop(2);
      case 'R':   // REDUCE
      case 0x81:  // NEWOBJ
        SOMM_RETURN_IF_ERROR(Pop(2));
        Push(Item{});
        return Status::Ok();
      case 0x92:  // NEWOBJ_EX
        SOMM_RETURN_IF_ERROR(Pop(3));
        Push(Item{});
        return Status::Ok();
      case '2': {  // DUP
        Item* top = nullptr;
        SOMM_RETURN_IF_ERROR(Top(&top));
        Push(Item(*top));
        return Status::Ok();
      }
      case 'q':  // BINPUT
        SOMM_RETURN_IF_ERROR(Need(1));
        return Put(Unsigned(1));
      case 'r':  // LONG_BINPUT
        SOMM_RETURN_IF_ERROR(Need(4));
        return Put(Unsigned(4));
      case 0x94:  // MEMOIZE
        return Put(memo_.size());
      case 'h':  // BINGET
        SOMM_RETURN_IF_ERROR(Need(1));
        return Get(Unsigned(1));
      case 'j':  // LONG_BINGET
        SOMM_RETURN_IF_ERROR(Need(4));
        return Get(Unsigned(4));
      case 'Q':  // BINPERSID
        return PersistentId();
      case '.':  // STOP
        stopped_ = true;
        return Status::Ok();
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        return InvalidArgument(std::string("unsupported opcode ") + hex);
      }
    }
  }

  std::string_view p_;
  size_t pos_ = 0;
  bool stopped_ = false;
  bool overflow_ = false;
  std::vector<Item> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Item> memo_;
  const std::function<Status(const PickledStorage&)>& storage_;
};

}  // namespace

Status ScanPickleStorages(std::string_view pickle,
                          const std::function<Status(const PickledStorage&)>& storage) {
  return Walker(pickle, storage).Run();
}

int64_t StorageItemSize(std::string_view type) {
  static const std::pair<const char*, int64_t> kSizes[] = {
      {"FloatStorage", 4},         {"DoubleStorage", 8},       {"HalfStorage", 2},
      {"BFloat16Storage", 2},      {"LongStorage", 8},         {"IntStorage", 4},
      {"ShortStorage", 2},         {"CharStorage", 1},         {"ByteStorage", 1},
      {"BoolStorage", 1},          {"ComplexFloatStorage", 8}, {"ComplexDoubleStorage", 16},
      {"ComplexHalfStorage", 4},   {"QInt8Storage", 1},        {"QUInt8Storage", 1},
      {"QInt32Storage", 4},        {"QUInt4x2Storage", 1},     {"QUInt2x4Storage", 1}};
  for (const auto& [name, size] : kSizes) {
    if (type == name) return size;
  }
  return 0;
}

}  // namespace somm
