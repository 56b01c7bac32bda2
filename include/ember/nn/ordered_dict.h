// OrderedDict: string keys in insertion order, as the module registries and state dicts need.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/errors.h"

namespace ember::nn {

/// A map from names to values that iterates in insertion order (Python's dict, LibTorch's
/// torch::OrderedDict). Items are std::pair<std::string, V>, so structured bindings work:
/// `for (const auto& [name, tensor] : module.named_parameters())`.
template <typename V>
class OrderedDict {
 public:
  using Item = std::pair<std::string, V>;
  using iterator = typename std::vector<Item>::iterator;
  using const_iterator = typename std::vector<Item>::const_iterator;

  OrderedDict() = default;
  OrderedDict(std::initializer_list<Item> items) {
    for (const Item& item : items) insert(item.first, item.second);
  }

  /// Adds `key`, or replaces its value in place (keeping its position), as dict[key] = value.
  V& insert(const std::string& key, V value) {
    auto found = index_.find(key);
    if (found != index_.end()) return items_[found->second].second = std::move(value);
    index_.emplace(key, items_.size());
    items_.emplace_back(key, std::move(value));
    return items_.back().second;
  }

  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  /// The value of `key`; ValueError naming the key when it is absent.
  const V& at(const std::string& key) const {
    auto found = index_.find(key);
    EMBER_CHECK(found != index_.end(), ValueError, "key '", key, "' not found in OrderedDict");
    return items_[found->second].second;
  }
  V& at(const std::string& key) { return const_cast<V&>(static_cast<const OrderedDict&>(*this).at(key)); }
  const V& operator[](const std::string& key) const { return at(key); }
  V& operator[](const std::string& key) { return at(key); }
  /// Pointer to the value of `key`, or nullptr.
  const V* find(const std::string& key) const {
    auto found = index_.find(key);
    return found == index_.end() ? nullptr : &items_[found->second].second;
  }
  V* find(const std::string& key) { return const_cast<V*>(static_cast<const OrderedDict&>(*this).find(key)); }
  /// Removes `key` if present; later items keep their order.
  bool erase(const std::string& key) {
    auto found = index_.find(key);
    if (found == index_.end()) return false;
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(found->second));
    index_.clear();
    for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
    return true;
  }
  void clear() {
    items_.clear();
    index_.clear();
  }

  size_t size() const noexcept { return items_.size(); }
  bool empty() const noexcept { return items_.empty(); }
  const Item& item(size_t i) const { return items_.at(i); }
  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }

  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(items_.size());
    for (const Item& item : items_) out.push_back(item.first);
    return out;
  }
  std::vector<V> values() const {
    std::vector<V> out;
    out.reserve(items_.size());
    for (const Item& item : items_) out.push_back(item.second);
    return out;
  }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace ember::nn
