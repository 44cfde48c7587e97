// Stop strings over streamed text.
//
// The matcher keeps `held_`: the longest suffix of the text seen so far that is a proper prefix
// of some stop string (it could still become a stop string). Everything before it is emitted.
// Each push appends to `held_` and looks for complete stop strings there: no occurrence can
// start before `held_` (its start would have been part of a longer held suffix), and none lies
// wholly inside the old `held_` (it would have been found on an earlier push).
//
// When several stop strings occur, the one that ENDS first wins (ties: the longer one, which
// starts first). That is the one a byte-at-a-time stream would have completed first, so the
// result does not depend on how the text is split into pushes.
//
// UTF-8: the matcher works on bytes of complete text. Stop strings are valid UTF-8 (they start
// with a lead byte), so a held suffix — a prefix of a stop string — and a match both start at a
// character boundary, and the emitted text is always whole characters.
#include "runtime/stop_strings.h"

#include <algorithm>
#include <utility>

namespace kipp {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (auto& stop : stops)
    if (!stop.empty()) stops_.push_back(std::move(stop));
}

StopStringMatcher::Output StopStringMatcher::push(std::string_view text) {
  Output out;
  if (stopped_) return out;
  held_.append(text);

  // The stop string that completes first.
  size_t best_end = std::string::npos, best_pos = std::string::npos;
  for (const auto& stop : stops_) {
    const size_t pos = held_.find(stop);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stop.size();
    if (end < best_end || (end == best_end && pos < best_pos)) {
      best_end = end;
      best_pos = pos;
    }
  }
  if (best_pos != std::string::npos) {
    out.text = held_.substr(0, best_pos);
    out.stopped = true;
    stopped_ = true;
    held_.clear();
    return out;
  }

  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  const std::string_view held(held_);
  for (const auto& stop : stops_) {
    const size_t longest = std::min(stop.size() - 1, held.size());
    for (size_t length = longest; length > hold; --length) {
      if (held.substr(held.size() - length) == std::string_view(stop).substr(0, length)) {
        hold = length;
        break;
      }
    }
  }
  out.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopStringMatcher::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace kipp
