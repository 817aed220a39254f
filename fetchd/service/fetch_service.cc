#include "fetchd/service/fetch_service.h"

#include <condition_variable>
#include <deque>
#include <thread>
#include <vector>

namespace fetchd::service {

namespace {

fetch::v1::Phase to_proto(resolve::Phase phase) {
  switch (phase) {
    case resolve::Phase::Resolving: return fetch::v1::PHASE_RESOLVING;
    case resolve::Phase::Metadata: return fetch::v1::PHASE_METADATA;
    case resolve::Phase::Weights: return fetch::v1::PHASE_WEIGHTS;
    case resolve::Phase::Verifying: return fetch::v1::PHASE_VERIFYING;
  }
  return fetch::v1::PHASE_UNSPECIFIED;
}

fetch::v1::Proof to_proto(resolve::Proof proof) {
  switch (proof) {
    case resolve::Proof::Sha256: return fetch::v1::PROOF_SHA256;
    case resolve::Proof::GitBlobSha1: return fetch::v1::PROOF_GIT_BLOB_SHA1;
    case resolve::Proof::XetHash: return fetch::v1::PROOF_XET_HASH;
    case resolve::Proof::SafetensorsLayout: return fetch::v1::PROOF_SAFETENSORS_LAYOUT;
    case resolve::Proof::GgufLayout: return fetch::v1::PROOF_GGUF_LAYOUT;
    case resolve::Proof::Local: return fetch::v1::PROOF_LOCAL;
    case resolve::Proof::Cached: return fetch::v1::PROOF_CACHED;
  }
  return fetch::v1::PROOF_UNSPECIFIED;
}

}  // namespace

grpc::StatusCode status_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Usage: return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorKind::NotFound: return grpc::StatusCode::NOT_FOUND;
    case ErrorKind::Auth: return grpc::StatusCode::PERMISSION_DENIED;
    case ErrorKind::Integrity: return grpc::StatusCode::DATA_LOSS;
    case ErrorKind::OfflineMiss: return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorKind::Network: return grpc::StatusCode::UNAVAILABLE;
    case ErrorKind::Unsupported: return grpc::StatusCode::UNIMPLEMENTED;
    case ErrorKind::Internal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

fetch::v1::ResolveResult to_proto(const resolve::Resolution& resolution) {
  fetch::v1::ResolveResult out;
  out.set_local_path(resolution.local_path.string());
  out.set_commit(resolution.commit);
  out.set_served_model_name(resolution.served_model_name);
  out.set_from_cache(resolution.from_cache);
  for (const auto& f : resolution.files) {
    auto* file = out.add_files();
    file->set_path(f.path);
    file->set_size(f.size);
    file->set_blob_id(f.blob_id);
    for (const auto p : f.proofs) file->add_proofs(to_proto(p));
  }
  return out;
}

// One resolve shared by every caller asking for the same thing at the same time.
struct FetchService::Flight : resolve::ResolveObserver {
  struct Subscriber {
    std::deque<fetch::v1::ResolveEvent> events;
  };

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::shared_ptr<Subscriber>> subscribers;
  bool done = false;
  std::optional<fetch::v1::ResolveResult> result;
  std::optional<FetchError> error;
  std::optional<fetch::v1::ResolveEvent> last_progress;  // replayed to a caller that joins late
  transfer::CancelToken cancel;
  std::thread worker;

  void publish(fetch::v1::ResolveEvent event) {
    {
      std::lock_guard lock(mutex);
      for (auto& s : subscribers) s->events.push_back(event);
      last_progress = std::move(event);
    }
    changed.notify_all();
  }

  void progress(resolve::Phase phase, const std::string& file, std::uint64_t done_bytes, std::uint64_t total) override {
    fetch::v1::ResolveEvent event;
    auto* p = event.mutable_progress();
    p->set_phase(to_proto(phase));
    p->set_file(file);
    p->set_bytes_done(done_bytes);
    p->set_bytes_total(total);
    publish(std::move(event));
  }
};

FetchService::~FetchService() {
  std::unique_lock lock(mutex_);
  for (auto& [key, weak] : flights_) {
    if (auto flight = weak.lock()) flight->cancel.cancel();
  }
  idle_.wait(lock, [this] { return running_ == 0; });
}

std::size_t FetchService::flights_in_progress() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [key, weak] : flights_) {
    if (auto flight = weak.lock()) {
      std::lock_guard flight_lock(flight->mutex);
      n += flight->done ? 0 : 1;
    }
  }
  return n;
}

std::shared_ptr<FetchService::Flight> FetchService::join(const fetch::v1::ResolveRequest& request) {
  const std::string key = request.model() + '\n' + request.revision() + '\n' + request.download_dir();
  std::lock_guard lock(mutex_);
  if (auto existing = flights_[key].lock()) {
    std::lock_guard flight_lock(existing->mutex);
    if (!existing->done) return existing;
  }
  // The worker holds the flight alive until it finishes; the map only remembers it weakly.
  auto flight = std::shared_ptr<Flight>(new Flight, [](Flight* f) {
    if (f->worker.joinable()) f->worker.detach();
    delete f;
  });
  flights_[key] = flight;
  ++running_;
  resolve::ResolveRequest resolve_request{request.model(), request.revision(), request.download_dir()};
  flight->worker = std::thread([this, flight, resolve_request] {
    std::optional<fetch::v1::ResolveResult> result;
    std::optional<FetchError> error;
    try {
      result = to_proto(resolver_.resolve(resolve_request, *flight, &flight->cancel));
    } catch (const FetchError& e) {
      error = e;
    } catch (const std::exception& e) {
      error = FetchError(ErrorKind::Internal, e.what());
    }
    {
      std::lock_guard flight_lock(flight->mutex);
      flight->result = std::move(result);
      flight->error = std::move(error);
      flight->done = true;
    }
    flight->changed.notify_all();
    std::lock_guard service_lock(mutex_);
    --running_;
    idle_.notify_all();
  });
  return flight;
}

grpc::Status FetchService::Resolve(grpc::ServerContext* context, const fetch::v1::ResolveRequest* request,
                                   grpc::ServerWriter<fetch::v1::ResolveEvent>* writer) {
  auto flight = join(*request);
  auto me = std::make_shared<Flight::Subscriber>();
  {
    std::lock_guard lock(flight->mutex);
    if (flight->last_progress) me->events.push_back(*flight->last_progress);
    flight->subscribers.push_back(me);
  }
  const auto leave = [&] {
    std::lock_guard lock(flight->mutex);
    std::erase(flight->subscribers, me);
    if (flight->subscribers.empty() && !flight->done) flight->cancel.cancel();  // nobody is waiting any more
  };

  std::unique_lock lock(flight->mutex);
  for (;;) {
    flight->changed.wait_for(lock, std::chrono::milliseconds(200), [&] { return flight->done || !me->events.empty(); });
    while (!me->events.empty()) {
      auto event = std::move(me->events.front());
      me->events.pop_front();
      lock.unlock();
      const bool sent = writer->Write(event);
      lock.lock();
      if (!sent) break;
    }
    if (context->IsCancelled()) {
      lock.unlock();
      leave();
      return {grpc::StatusCode::CANCELLED, "the caller went away"};
    }
    if (flight->done && me->events.empty()) break;
  }
  const auto result = flight->result;
  const auto error = flight->error;
  lock.unlock();
  leave();

  if (error) {
    context->AddTrailingMetadata(kErrorKindMetadata, std::string(error_kind_name(error->kind())));
    return {status_code_for(error->kind()), error->what()};
  }
  fetch::v1::ResolveEvent final_event;
  *final_event.mutable_result() = *result;
  writer->Write(final_event);
  return grpc::Status::OK;
}

}  // namespace fetchd::service
