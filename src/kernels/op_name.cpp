#include "kernels/op_name.h"

#include <array>
#include <string>

#include "ember/errors.h"

namespace ember::detail {

namespace {

// The op list's name and family columns (Note [The op list]).
constexpr std::array kOpNames = {
#define EMBER_OP_ROW(Kind, name, ...) name,
    EMBER_OP_LIST
#undef EMBER_OP_ROW
};
static_assert(kOpNames.size() == kOpCount, "one name per row of the op list");

constexpr std::array kOpFamilies = {
#define EMBER_OP_ROW(Kind, name, Family, ...) OpFamily::Family,
    EMBER_OP_LIST
#undef EMBER_OP_ROW
};
static_assert(kOpFamilies.size() == kOpCount, "one family per row of the op list");

// The Args column, as positions in ArgsVariant.
constexpr std::array kOpArgs = {
#define EMBER_OP_ROW(Kind, name, Family, cpu, cuda, Args) kernel_args_index<kargs::Args>(),
    EMBER_OP_LIST
#undef EMBER_OP_ROW
};
static_assert(kOpArgs.size() == kOpCount, "one argument struct per row of the op list");

constexpr std::array kArgsNames = {
    "kargs::None",     "kargs::Alpha",       "kargs::Value",          "kargs::IsClose",    "kargs::Dim",
    "kargs::Sort",     "kargs::Multinomial", "kargs::Normal",         "kargs::Uniform",    "kargs::Arange",
    "kargs::Clamp",    "kargs::ClampScalar", "kargs::NllLoss",        "kargs::LayerNorm",  "kargs::Gelu",
    "kargs::Triangle", "kargs::IndexAdd",    "kargs::AmpUpdateScale", "kargs::GridSample", "kargs::Matmul",
    "kargs::Fft",
};
static_assert(kArgsNames.size() == std::variant_size_v<ArgsVariant>, "one name per kernel argument struct");
static_assert(kernel_args_index<kargs::Fft>() == kArgsNames.size() - 1 && kernel_args_index<kargs::Dim>() == 4);

}  // namespace

const char* op_name(OpKind op) noexcept {
  auto i = static_cast<size_t>(op);
  return i < kOpCount ? kOpNames[i] : "op";
}

OpFamily op_family(OpKind op) noexcept { return kOpFamilies[static_cast<size_t>(op) % kOpCount]; }

const char* args_name(size_t index) noexcept { return index < kArgsNames.size() ? kArgsNames[index] : "kargs::?"; }

void check_args(const KernelCall& call) {
  const size_t expected = kOpArgs[static_cast<size_t>(call.op) % kOpCount];
  if (call.args.index() != expected) [[unlikely]] {
    const std::string what = cat("a ", op_name(call.op), " launch carries ", args_name(call.args.index()),
                                 " where its row of the op list names ", args_name(expected));
    assert_failed(what.c_str(), __FILE__, __LINE__);
  }
}

OpArgs default_args(OpKind op) {
  constexpr std::array kDefaults = {
#define EMBER_OP_ROW(Kind, name, Family, cpu, cuda, Args) +[]() -> OpArgs { return kargs::Args{}; },
      EMBER_OP_LIST
#undef EMBER_OP_ROW
  };
  static_assert(kDefaults.size() == kOpCount);
  return kDefaults[static_cast<size_t>(op) % kOpCount]();
}

void OpArgs::wrong_args(OpKind op, size_t expected) const {
  const std::string what =
      cat("the ", op_name(op), " kernel reads ", args_name(expected), " but the launch carries ", args_name(index()));
  assert_failed(what.c_str(), __FILE__, __LINE__);
}

}  // namespace ember::detail
