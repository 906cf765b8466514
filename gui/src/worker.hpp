// The background worker: the valley and the fit map take many simulations, so they run on one
// std::thread and fill in while the GUI keeps drawing. The GUI posts requests (values: copies of
// the configs) and reads the latest published snapshots (shared_ptr<const ...>) each frame. The
// jobs (jobs.hpp) advance one plan or one cell per step; a snapshot of what is done is published
// every `publish_every_ms` and at the end, so the views draw what is ready. A new request
// supersedes the job in progress at its next step; a valley job goes before the fit map's steps
// (the n slider answers at once).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "jobs.hpp"

namespace gui {

// Snapshots are published at most this often (and at each job's end), so the GUI sees the views
// fill in without the worker copying a large fit map after every cell.
inline constexpr double kPublishEveryMs = 8;

// Contract: requests may come from the GUI thread at any rate; valley() and fitmap() return the
// newest published snapshot (possibly of an older key, possibly incomplete). The destructor
// stops the thread at the next step.
class Worker {
 public:
  explicit Worker(double publish_every_ms = kPublishEveryMs);  // 0: after every step
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void request(ValleyRequest r);  // supersedes any valley request not finished
  void request(FitMapRequest r);  // supersedes any fit map request not finished

  std::shared_ptr<const ValleyData> valley() const;  // newest snapshot; null before the first
  std::shared_ptr<const FitMapData> fitmap() const;
  bool idle() const;  // nothing pending and nothing in progress

 private:
  void loop();

  const double publish_every_ms_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<ValleyRequest> valley_req_;   // guarded by mu_
  std::optional<FitMapRequest> fitmap_req_;   // guarded by mu_
  std::shared_ptr<const ValleyData> valley_;  // guarded by mu_
  std::shared_ptr<const FitMapData> fitmap_;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  bool busy_ = false;                         // guarded by mu_: a job is in progress
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace gui
