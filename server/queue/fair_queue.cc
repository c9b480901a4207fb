#include "server/queue/fair_queue.h"

#include <algorithm>

namespace vramlab::server {

using vramlab::v1::Priority;

Priority FairQueue::Normalize(Priority priority) {
  return priority == vramlab::v1::PRIORITY_UNSPECIFIED ? vramlab::v1::PRIORITY_NORMAL : priority;
}

FairQueue::Level& FairQueue::LevelOf(Priority priority) {
  switch (Normalize(priority)) {
    case vramlab::v1::PRIORITY_HIGH:
      return levels_[0];
    case vramlab::v1::PRIORITY_LOW:
      return levels_[2];
    default:
      return levels_[1];
  }
}

void FairQueue::Push(Entry entry) {
  if (index_.contains(entry.id)) return;
  entry.priority = Normalize(entry.priority);
  Level& level = LevelOf(entry.priority);
  auto& line = level.lines[entry.owner];
  // A newcomer owner joins at the back of the turn order.
  if (line.empty()) level.turn.push_back(entry.owner);
  line.push_back(entry.id);
  ++owner_counts_[entry.owner];
  index_.emplace(entry.id, std::move(entry));
  positions_valid_ = false;
}

std::optional<FairQueue::Entry> FairQueue::Pop() {
  for (Level& level : levels_) {
    if (level.turn.empty()) continue;
    std::string owner = level.turn.front();
    level.turn.pop_front();
    auto& line = level.lines[owner];
    std::string id = line.front();
    line.pop_front();
    if (line.empty()) {
      level.lines.erase(owner);
    } else {
      level.turn.push_back(owner);  // the owner's next one waits for everyone else's turn
    }
    auto it = index_.find(id);
    Entry entry = std::move(it->second);
    index_.erase(it);
    if (--owner_counts_[entry.owner] == 0) owner_counts_.erase(entry.owner);
    positions_valid_ = false;
    return entry;
  }
  return std::nullopt;
}

bool FairQueue::Remove(const std::string& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  Entry entry = std::move(it->second);
  index_.erase(it);
  Level& level = LevelOf(entry.priority);
  auto& line = level.lines[entry.owner];
  line.erase(std::find(line.begin(), line.end(), id));
  if (line.empty()) {
    level.lines.erase(entry.owner);
    level.turn.remove(entry.owner);
  }
  if (--owner_counts_[entry.owner] == 0) owner_counts_.erase(entry.owner);
  positions_valid_ = false;
  return true;
}

int FairQueue::CountOwner(const std::string& owner) const {
  auto it = owner_counts_.find(owner);
  return it == owner_counts_.end() ? 0 : it->second;
}

int FairQueue::CountPriority(Priority priority) const {
  const Level& level = const_cast<FairQueue*>(this)->LevelOf(priority);
  int n = 0;
  for (const auto& [owner, line] : level.lines) n += static_cast<int>(line.size());
  return n;
}

std::vector<std::string> FairQueue::Order() const {
  std::vector<std::string> order;
  order.reserve(index_.size());
  for (const Level& level : levels_) {
    // Simulate Pop's rotation: round r takes the r-th entry of every owner, in turn order.
    std::vector<const std::deque<std::string>*> lines;
    for (const std::string& owner : level.turn) lines.push_back(&level.lines.at(owner));
    for (size_t round = 0; !lines.empty(); ++round) {
      std::vector<const std::deque<std::string>*> still;
      for (const auto* line : lines) {
        order.push_back((*line)[round]);
        if (line->size() > round + 1) still.push_back(line);
      }
      lines = std::move(still);
    }
  }
  return order;
}

const absl::flat_hash_map<std::string, int>& FairQueue::Positions() const {
  if (!positions_valid_) {
    positions_.clear();
    int position = 0;
    for (const std::string& id : Order()) positions_[id] = ++position;
    positions_valid_ = true;
  }
  return positions_;
}

int FairQueue::Position(const std::string& id) const {
  const auto& positions = Positions();
  auto it = positions.find(id);
  return it == positions.end() ? 0 : it->second;
}

}  // namespace vramlab::server
