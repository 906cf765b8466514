#include "worker.hpp"

#include <chrono>

#include "clock.hpp"

namespace gui {

Worker::Worker(double publish_every_ms)
    : publish_every_ms_(publish_every_ms), thread_([this] { loop(); }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Worker::request(ValleyRequest r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    valley_req_ = std::move(r);
  }
  cv_.notify_all();
}

void Worker::request(FitMapRequest r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    fitmap_req_ = std::move(r);
  }
  cv_.notify_all();
}

std::shared_ptr<const ValleyData> Worker::valley() const {
  std::lock_guard<std::mutex> lock(mu_);
  return valley_;
}

std::shared_ptr<const FitMapData> Worker::fitmap() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fitmap_;
}

bool Worker::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !valley_req_ && !fitmap_req_ && !busy_;
}

void Worker::loop() {
  // The jobs belong to this thread; only requests and snapshots cross the mutex.
  std::optional<ValleyJob> valley;
  std::optional<FitMapJob> fitmap;
  Clock::time_point valley_published, fitmap_published;  // of each job's last snapshot
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || valley_req_ || fitmap_req_ || valley || fitmap; });
      if (stop_) return;
      // A new request replaces the job in progress (its partial snapshot stays until the new
      // job's first one).
      // A new job publishes after its first step (the valley's head draws the whole curves).
      if (valley_req_) {
        valley.emplace(std::move(*valley_req_));
        valley_req_.reset();
        valley_published = {};
      }
      if (fitmap_req_) {
        fitmap.emplace(std::move(*fitmap_req_));
        fitmap_req_.reset();
        fitmap_published = {};
      }
      busy_ = true;
    }
    // One step, the valley first.
    std::shared_ptr<const ValleyData> v;
    std::shared_ptr<const FitMapData> f;
    if (valley) {
      const bool more = valley->step();
      if (!more || ms_since(valley_published) >= publish_every_ms_) {
        v = valley->snapshot();
        valley_published = Clock::now();
      }
      if (!more) valley.reset();
    } else if (fitmap) {
      const bool more = fitmap->step();
      if (!more || ms_since(fitmap_published) >= publish_every_ms_) {
        f = fitmap->snapshot();
        fitmap_published = Clock::now();
      }
      if (!more) fitmap.reset();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (v) valley_ = std::move(v);
    if (f) fitmap_ = std::move(f);
    busy_ = valley || fitmap;
  }
}

}  // namespace gui
