// The queue of experiments waiting for a slot. Higher priorities go first; within a priority the
// queue is round-robin across owners, so one user's thirty submissions cannot delay a colleague's
// single one by more than one turn. Within one owner and priority, first come first served.
//
// Not thread-safe: the Engine guards its FairQueue with its own mutex.
#ifndef VRAMLAB_SERVER_QUEUE_FAIR_QUEUE_H_
#define VRAMLAB_SERVER_QUEUE_FAIR_QUEUE_H_

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "vramlab/v1/experiment.pb.h"

namespace vramlab::server {

class FairQueue {
 public:
  struct Entry {
    std::string id;
    std::string owner;
    vramlab::v1::Priority priority = vramlab::v1::PRIORITY_NORMAL;
  };

  // Adds at the back of its owner's line. An id already queued is ignored.
  void Push(Entry entry);
  // Takes the next experiment to run.
  std::optional<Entry> Pop();
  // Removes a queued experiment; false if it is not queued.
  bool Remove(const std::string& id);

  bool Contains(const std::string& id) const { return index_.contains(id); }
  int size() const { return static_cast<int>(index_.size()); }
  bool empty() const { return index_.empty(); }
  int CountOwner(const std::string& owner) const;
  int CountPriority(vramlab::v1::Priority priority) const;

  // 1-based position of every queued experiment: the order Pop would return them in if nothing
  // else arrived. Cached until the next change; O(n) after a change.
  const absl::flat_hash_map<std::string, int>& Positions() const;
  int Position(const std::string& id) const;
  // Ids in Pop order.
  std::vector<std::string> Order() const;

  // UNSPECIFIED counts as NORMAL.
  static vramlab::v1::Priority Normalize(vramlab::v1::Priority priority);

 private:
  // One priority level: the owners with queued work in turn order, each with its own line.
  struct Level {
    std::list<std::string> turn;  // owners; the front one's first entry runs next
    std::map<std::string, std::deque<std::string>> lines;
  };

  Level& LevelOf(vramlab::v1::Priority priority);

  // Index 0 = HIGH, 1 = NORMAL, 2 = LOW.
  Level levels_[3];
  absl::flat_hash_map<std::string, Entry> index_;
  absl::flat_hash_map<std::string, int> owner_counts_;
  mutable bool positions_valid_ = false;
  mutable absl::flat_hash_map<std::string, int> positions_;
};

}  // namespace vramlab::server

#endif  // VRAMLAB_SERVER_QUEUE_FAIR_QUEUE_H_
