// Reading back what examples/train and examples/charlm save in a checkpoint: a file of
// another program or model, or one whose metadata was edited, is refused with an ember
// error naming the file and what did not fit, so that the programs end with a message and
// exit status 1, never with std::terminate (std::stoi and std::map::at throw standard
// exceptions, which the programs do not catch as ember errors).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

#include "ember/ember.h"

namespace examples {

/// The integer metadata entry `key` of the checkpoint at `path`, which must lie in
/// [`min`, `max`]. ValueError naming the file when the entry is missing (a checkpoint of
/// another program), not an integer, or out of range.
inline int64_t metadata_integer(const std::string& path, const std::string& key, int64_t min, int64_t max) {
  const auto metadata = ember::load_metadata(path);
  const auto it = metadata.find(key);
  if (it == metadata.end())
    throw ember::ValueError(path + " has no '" + key + "' in its metadata: it is not a checkpoint of this program");
  const std::string& text = it->second;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string entry = path + ": metadata " + key + "='" + text + "'";
  if (error == std::errc::result_out_of_range || (error == std::errc() && (value < min || value > max)))
    throw ember::ValueError(entry + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  if (error != std::errc() || end != text.data() + text.size()) throw ember::ValueError(entry + " is not an integer");
  return value;
}

/// Runs `load` (a load_state_dict of the model, the optimizer or the scheduler: `part`) and
/// turns its error into one that names the checkpoint and says what the part must match.
template <typename Load>
void load_checkpoint_part(const std::string& path, const std::string& part, const std::string& must_match,
                          Load&& load) {
  try {
    load();
  } catch (const ember::Error& error) {
    throw ember::ValueError(path + ": its " + part + " state does not fit this run (" + must_match +
                            "): " + error.what());
  }
}

}  // namespace examples
