#include "gateway/proxy.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "gateway/asio.h"
#include "gateway/headers.h"

namespace arbiter::gateway {

namespace {

using Clock = std::chrono::steady_clock;

// Sockets and timers bound to an io_context's own executor type: no type-erased executor (its
// copies and virtual calls) on every operation.
using Executor = net::io_context::executor_type;
using Socket = net::basic_stream_socket<tcp, Executor>;
using Acceptor = net::basic_socket_acceptor<tcp, Executor>;
using Timer = net::basic_waitable_timer<Clock, net::wait_traits<Clock>, Executor>;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Answers of at most this many bytes (with a Content-Length) are read whole and sent in one
// write; longer, chunked or close-delimited ones are relayed piece by piece as they arrive.
constexpr uint64_t kBufferedMax = 256 * 1024;
constexpr size_t kRelayBuffer = 64 * 1024;
constexpr uint32_t kHeaderLimit = 64 * 1024;
// A pooled connection idle at least this long is checked before it carries a request.
constexpr int64_t kIdleCheckMs = 50;
// No limit on an answer's body. (Not boost::none: Boost 1.74's parser compares a Content-Length
// with an empty optional as if the limit were below it.)
constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();

std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += ch;
    }
  }
  return out;
}

std::string ErrorBody(std::string_view code, std::string_view message) {
  return fmt::format("{{\"error\":{{\"code\":\"{}\",\"message\":\"{}\"}}}}\n", code,
                     JsonEscape(message));
}

bool Idempotent(http::verb v) {
  switch (v) {
    case http::verb::get:
    case http::verb::head:
    case http::verb::options:
    case http::verb::put:
    case http::verb::delete_:
    case http::verb::trace:
      return true;
    default:
      return false;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The io thread and what lives on it.

class Proxy::Worker {
 public:
  Worker(int index, const ProxySettings& settings, Stats& stats,
         const std::function<std::string()>& metrics_text);
  ~Worker();

  Status Bind(const tcp::endpoint& endpoint);
  void Start();
  void Stop();
  void SetTable(std::shared_ptr<const Table> table);

  net::io_context& ioc() { return *ioc_; }
  int local_port() const { return acceptor_->local_endpoint().port(); }
  int index() const { return index_; }
  const ProxySettings& settings() const { return settings_; }
  Stats& stats() { return stats_; }
  const std::shared_ptr<const Table>& table() const { return table_; }
  std::string MetricsText() const { return metrics_text_(); }

  uint64_t Random() {
    // xorshift64*: per thread, no lock.
    rng_ ^= rng_ >> 12;
    rng_ ^= rng_ << 25;
    rng_ ^= rng_ >> 27;
    return rng_ * 0x2545F4914F6CDD1DULL;
  }
  double RandomUnit() { return static_cast<double>(Random() >> 11) * 0x1.0p-53; }

  // Something with a deadline enforced by Sweep. OnDeadline runs on this thread and must not
  // destroy anything synchronously: it closes a socket or posts.
  class Timed {
   public:
    explicit Timed(Worker& w) : worker_(w) {
      next_ = w.timed_head_;
      if (next_ != nullptr) next_->prev_ = this;
      w.timed_head_ = this;
    }
    virtual ~Timed() {
      if (prev_ != nullptr) {
        prev_->next_ = next_;
      } else {
        worker_.timed_head_ = next_;
      }
      if (next_ != nullptr) next_->prev_ = prev_;
    }
    Timed(const Timed&) = delete;
    Timed& operator=(const Timed&) = delete;

    void SetDeadline(int64_t ms_from_now) { deadline_ms_ = NowMs() + ms_from_now; }
    void ClearDeadline() { deadline_ms_ = 0; }
    virtual void OnDeadline() = 0;

   protected:
    Worker& worker_;

   private:
    friend class Worker;
    int64_t deadline_ms_ = 0;
    Timed* prev_ = nullptr;
    Timed* next_ = nullptr;
  };

  // A connection to a replica, in use by one exchange or idle in this thread's pool.
  struct Upstream final : Timed {
    Upstream(Worker& w, uint64_t replica_serial)
        : Timed(w), socket(w.ioc()), serial(replica_serial) {}
    void OnDeadline() override {
      timed_out = true;
      beast::error_code ec;
      socket.close(ec);
    }
    Socket socket;
    beast::flat_buffer buffer;
    uint64_t serial;
    int64_t idle_since_ms = 0;
    bool timed_out = false;
  };

  // A pooled connection to the replica, still open; null when none.
  std::unique_ptr<Upstream> TakeIdle(uint64_t serial);
  void PutIdle(std::unique_ptr<Upstream> up);

  std::atomic<int64_t> clients{0};

 private:
  void Accept();
  void ScheduleSweep();
  void Sweep();

  const int index_;
  const ProxySettings& settings_;
  Stats& stats_;
  const std::function<std::string()>& metrics_text_;
  std::unique_ptr<net::io_context> ioc_;
  std::optional<Acceptor> acceptor_;
  std::optional<Timer> sweep_timer_;
  std::optional<Timer> accept_timer_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::thread thread_;
  std::shared_ptr<const Table> table_;
  Timed* timed_head_ = nullptr;
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<Upstream>>> idle_;
  uint64_t rng_;
};

namespace {

using Worker = Proxy::Worker;
using Upstream = Proxy::Worker::Upstream;

class Exchange;

// One client connection: reads a request, routes it, answers the gateway's own paths, hands
// the rest to an Exchange, and reads the next request once the answer is written.
class ClientConn final : public Worker::Timed, public std::enable_shared_from_this<ClientConn> {
 public:
  ClientConn(Worker& w, Socket socket) : Timed(w), socket_(std::move(socket)) {
    w.clients.fetch_add(1, std::memory_order_relaxed);
    beast::error_code ec;
    const auto remote = socket_.remote_endpoint(ec);
    if (!ec) ip_ = remote.address().to_string();
  }
  ~ClientConn() override { worker_.clients.fetch_sub(1, std::memory_order_relaxed); }

  void Start() { ReadHeader(); }
  void OnDeadline() override { Close(); }

  Socket& socket() { return socket_; }
  Worker& worker() { return worker_; }

  // After an answer: the next request, or the end of the connection.
  void Continue(bool keep_alive) {
    ClearDeadline();
    if (!keep_alive) {
      beast::error_code ec;
      socket_.shutdown(Socket::shutdown_send, ec);
      return;  // the last reference goes with the caller's
    }
    ReadHeader();
  }

  void Close() {
    beast::error_code ec;
    socket_.close(ec);
  }

  // An answer of the gateway's own (404, 503 before routing, /metrics, errors reading).
  void Answer(http::status status, std::string content_type, std::string body, unsigned version,
              bool keep_alive) {
    own_ = {};
    own_.result(status);
    own_.version(version);
    own_.set(http::field::content_type, content_type);
    own_.body() = std::move(body);
    own_.prepare_payload();
    own_.keep_alive(keep_alive);
    SetDeadline(worker_.settings().client_send_timeout_ms);
    http::async_write(socket_, own_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        self->Continue(!ec && keep_alive);
                      });
  }

 private:
  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(static_cast<uint64_t>(worker_.settings().max_body_bytes));
    SetDeadline(worker_.settings().client_idle_timeout_ms);
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  // A request that could not be read: 400, 413 or 431 when it was HTTP, silence otherwise.
  void ReadFailed(beast::error_code ec) {
    ClearDeadline();
    if (ec == http::error::end_of_stream || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == net::error::eof ||
        ec == net::error::bad_descriptor) {
      return;
    }
    if (ec == http::error::body_limit) {
      Answer(http::status::payload_too_large, "application/json",
             ErrorBody("invalid_argument", fmt::format("the request body is larger than {} bytes",
                                                       worker_.settings().max_body_bytes)),
             11, false);
    } else if (ec == http::error::header_limit) {
      Answer(http::status::request_header_fields_too_large, "application/json",
             ErrorBody("invalid_argument", "the request header is larger than 64 KiB"), 11, false);
    } else if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
      Answer(http::status::bad_request, "application/json",
             ErrorBody("invalid_argument", "not an HTTP/1.1 request: " + ec.message()), 11, false);
    }
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return ReadFailed(ec);
    if (parser_->is_done()) return Dispatch();
    const auto& h = parser_->get();
    const auto expect = h.find(http::field::expect);
    if (expect != h.end() && beast::iequals(expect->value(), "100-continue") && h.version() >= 11) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(socket_, net::buffer(kContinue),
                       [self = shared_from_this()](beast::error_code e, size_t) {
                         if (e) return self->ReadFailed(e);
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    SetDeadline(worker_.settings().client_idle_timeout_ms);
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->ReadFailed(ec);
                       self->Dispatch();
                     });
  }

  void Dispatch();

  Socket socket_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> own_;
  std::string ip_;
};

// One request on its way to a replica and back: the choice of revision and replica, the wait
// in the service's queue, the connection, one retry, the answer.
class Exchange final : public Waiter, public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<ClientConn> client, std::shared_ptr<const Table> table,
           const Service* service, http::request<http::string_body>&& req, std::string target,
           std::string_view client_ip)
      : client_(std::move(client)),
        worker_(client_->worker()),
        table_(std::move(table)),
        service_(service),
        name_(service->name),
        shared_(service->shared),
        req_(std::move(req)),
        arrived_(Clock::now()) {
    client_version_ = req_.version();
    client_keep_alive_ = req_.keep_alive();
    head_ = req_.method() == http::verb::head;
    idempotent_ = Idempotent(req_.method());
    PrepareUpstreamRequest(req_, std::move(target), client_ip);
  }

  void Start() { Attempt(/*admitted=*/false); }

  // From any thread (whoever popped this waiter): the retry runs on this exchange's thread.
  void Wake(std::shared_ptr<Waiter> self) override {
    net::post(worker_.ioc(),
              [self = std::static_pointer_cast<Exchange>(std::move(self))] { self->OnWake(); });
  }

 private:
  enum class State { kNew, kQueued, kForwarding, kDone };

  // The service in this thread's current table (a newer table may have come since).
  bool RefreshService() {
    if (worker_.table() != table_) {
      table_ = worker_.table();
      service_ = table_->FindByName(name_);
      if (service_ != nullptr && service_->shared != shared_) service_ = nullptr;
    }
    return service_ != nullptr;
  }

  // 1. Route: a free replica now, else the queue. `admitted`: already past the queue's
  // fairness rule (a retry).
  void Attempt(bool admitted) {
    if (!RefreshService()) {
      return Reject(fmt::format("service \"{}\" left the routing table", name_));
    }
    if (!admitted && shared_->queue.size() > 0) return Wait();
    if (TryAcquire()) return Forward();
    if (exclude_ != nullptr && no_candidate_) return NoOtherReplica();
    Wait();
  }

  // A revision by weight, then a replica in it; if that revision is full, any other with room
  // (a free slot is never left unused while requests wait).
  bool TryAcquire() {
    const Service& s = *service_;
    const Revision* first = PickRevision(s, worker_.RandomUnit());
    if (first == nullptr) {
      no_candidate_ = true;
      return false;
    }
    const int64_t now = NowMs();
    bool any = false;
    auto take = [&](const Revision* r) {
      Acquired a = AcquireReplica(*r, s.max_concurrency, now, exclude_.get(), worker_.Random());
      any = any || a.any_candidate;
      if (!a.replica) return false;
      revision_ = r;
      replica_ = std::move(a.replica);
      counters_ = r->counters[static_cast<size_t>(worker_.index())];
      counters_->AddInFlight(1);
      acquired_ = true;
      return true;
    };
    if (take(first)) return true;
    for (const Revision* r : s.routable) {
      if (r != first && take(r)) return true;
    }
    no_candidate_ = !any;
    return false;
  }

  // 2. Wait in the queue (the bound applies the first time only), then check again: a slot
  // freed between the failed try and the push would otherwise wake no one.
  void Wait() {
    const Service& s = *service_;
    const auto self = shared_from_this();
    if (state_ == State::kQueued) {
      shared_->queue.PushFront(self);
    } else {
      if (s.queue_max <= 0 || !shared_->queue.Push(self, s.queue_max)) {
        return Reject(s.queue_max <= 0
                          ? fmt::format("service \"{}\": every replica is busy and its "
                                        "request_queue.max is 0",
                                        name_)
                          : fmt::format("service \"{}\": {} requests already wait for a "
                                        "replica (request_queue.max)",
                                        name_, s.queue_max));
      }
      state_ = State::kQueued;
      queued_at_ = Clock::now();
      timer_.emplace(worker_.ioc());
      timer_->expires_after(std::chrono::milliseconds(std::max<int64_t>(1, s.queue_timeout_ms)));
      timer_->async_wait([self](beast::error_code ec) {
        if (ec != net::error::operation_aborted) self->OnQueueDeadline();
      });
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with Release's
    if (TryAcquire()) {
      // Popped meanwhile or not: either way this one goes now; a wake on its way is passed on.
      shared_->queue.Remove(this);
      Dequeued();
      Forward();
    }
  }

  void Dequeued() {
    if (timer_) timer_->cancel();
    queue_wait_ms_ = MsSince(queued_at_);
    state_ = State::kNew;
  }

  void OnWake() {
    if (state_ != State::kQueued) {
      // This one went ahead without the wake: hand the freed slot to the next waiter.
      WakeNext(*shared_);
      return;
    }
    if (!RefreshService()) {
      return Reject(fmt::format("service \"{}\" left the routing table", name_));
    }
    if (TryAcquire()) {
      Dequeued();
      return Forward();
    }
    if (expired_) return Reject(QueueTimeoutMessage());
    if (exclude_ != nullptr && no_candidate_) return NoOtherReplica();
    Wait();
  }

  void OnQueueDeadline() {
    if (state_ != State::kQueued) return;
    if (shared_->queue.Remove(this)) return Reject(QueueTimeoutMessage());
    expired_ = true;  // popped: the wake on its way answers
  }

  std::string QueueTimeoutMessage() const {
    return fmt::format(
        "service \"{}\": no replica was free within {} ms "
        "(request_queue.timeout_ms)",
        name_, service_ != nullptr ? service_->queue_timeout_ms : 0);
  }

  static void WakeNext(ServiceShared& shared) {
    if (shared.queue.size() == 0) return;
    if (std::shared_ptr<Waiter> w = shared.queue.Pop()) {
      Waiter* raw = w.get();
      raw->Wake(std::move(w));
    }
  }

  // Gives the replica's slot back (once) and wakes the oldest waiter of the service.
  void Release() {
    if (!acquired_) return;
    acquired_ = false;
    counters_->AddInFlight(-1);
    replica_->outstanding.fetch_sub(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    WakeNext(*shared_);
  }

  // 3. A pooled connection to the replica, else a new one.
  void Forward() {
    state_ = State::kForwarding;
    up_ = worker_.TakeIdle(replica_->serial);
    if (up_) {
      reused_ = true;
      return Send();
    }
    reused_ = false;
    up_ = std::make_unique<Upstream>(worker_, replica_->serial);
    tcp::endpoint endpoint;
    std::memcpy(endpoint.data(), &replica_->addr, replica_->addr_len);
    endpoint.resize(replica_->addr_len);
    up_->SetDeadline(worker_.settings().connect_timeout_ms);
    up_->socket.async_connect(
        endpoint, [self = shared_from_this()](beast::error_code ec) { self->OnConnect(ec); });
  }

  void OnConnect(beast::error_code ec) {
    up_->ClearDeadline();
    if (ec) {
      const std::string why = up_->timed_out ? fmt::format("no connection within {} ms",
                                                           worker_.settings().connect_timeout_ms)
                                             : ec.message();
      up_.reset();
      // Passive ejection: new requests skip this replica for a while.
      replica_->ejected_until_ms.store(NowMs() + worker_.settings().eject_ms,
                                       std::memory_order_relaxed);
      counters_->AddEjection();
      return Retry(fmt::format("cannot connect to replica {} ({}): {}", replica_->id,
                               replica_->address, why),
                   /*nothing_sent=*/true);
    }
    beast::error_code ignored;
    up_->socket.set_option(tcp::no_delay(true), ignored);
    Send();
  }

  void Send() {
    up_->SetDeadline(worker_.settings().upstream_timeout_ms);
    http::async_write(up_->socket, req_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->OnSent(ec);
    });
  }

  void OnSent(beast::error_code ec) {
    if (ec) {
      const bool timed_out = up_->timed_out;
      up_.reset();
      if (!timed_out && (reused_ || idempotent_)) {
        return Retry(fmt::format("replica {} ({}) closed the connection: {}", replica_->id,
                                 replica_->address, ec.message()));
      }
      return UpstreamFailed(timed_out ? http::status::gateway_timeout : http::status::bad_gateway,
                            fmt::format("sending to replica {} ({}) failed: {}", replica_->id,
                                        replica_->address, timed_out ? "timed out" : ec.message()));
    }
    ReadHeader();
  }

  // 4. The answer's header; then the body, read whole or relayed.
  void ReadHeader() {
    head_parser_.emplace();
    head_parser_->header_limit(kHeaderLimit);
    head_parser_->body_limit(kNoLimit);
    if (head_) head_parser_->skip(true);
    up_->SetDeadline(worker_.settings().upstream_timeout_ms);
    http::async_read_header(
        up_->socket, up_->buffer, *head_parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) {
      const bool timed_out = up_->timed_out;
      const bool nothing = !head_parser_->got_some();
      up_.reset();
      if (timed_out) {
        return UpstreamFailed(
            http::status::gateway_timeout,
            fmt::format("replica {} ({}) did not answer within {} ms", replica_->id,
                        replica_->address, worker_.settings().upstream_timeout_ms));
      }
      // Nothing came back: the replica died or closed the connection. Sent again only when
      // running it twice is harmless (a failed write to a pooled connection is retried for
      // any method, in OnSent; a pooled connection found closed never carries a request).
      if (nothing && idempotent_) {
        return Retry(fmt::format("replica {} ({}) closed the connection: {}", replica_->id,
                                 replica_->address, ec.message()));
      }
      return UpstreamFailed(
          http::status::bad_gateway,
          fmt::format("replica {} ({}) failed: {}", replica_->id, replica_->address, ec.message()));
    }
    const unsigned status = head_parser_->get().result_int();
    if (status == 101) {
      up_.reset();
      return UpstreamFailed(http::status::bad_gateway,
                            "the replica switched protocols: upgrades are not supported");
    }
    if (status >= 100 && status < 200) return ReadHeader();  // 103 Early Hints and the like
    const auto length = head_parser_->content_length();
    if (head_parser_->is_done()) return OnBody({});
    if (length && *length <= kBufferedMax) return ReadBuffered();
    StartRelay();
  }

  void ReadBuffered() {
    // The body mostly came in with the header: parse what is buffered before reading more.
    auto& p = *head_parser_;
    p.eager(true);
    beast::error_code ec;
    while (!p.is_done() && up_->buffer.size() > 0) {
      const size_t n = p.put(up_->buffer.data(), ec);
      if (ec == http::error::need_more) ec = {};
      if (ec || n == 0) break;
      up_->buffer.consume(n);
    }
    if (ec || p.is_done()) return OnBody(ec);
    up_->SetDeadline(worker_.settings().upstream_timeout_ms);
    http::async_read(up_->socket, up_->buffer, p,
                     [self = shared_from_this()](beast::error_code e, size_t) { self->OnBody(e); });
  }

  void OnBody(beast::error_code ec) {
    if (ec) {
      const bool timed_out = up_->timed_out;
      up_.reset();
      return UpstreamFailed(timed_out ? http::status::gateway_timeout : http::status::bad_gateway,
                            fmt::format("replica {} ({}) broke off its answer: {}", replica_->id,
                                        replica_->address, timed_out ? "timed out" : ec.message()));
    }
    upstream_keep_alive_ = head_parser_->keep_alive();
    res_ = head_parser_->release();
    SendBuffered();
  }

  // The replica is done with this request: its connection goes back to the pool (when it can
  // carry another request) and its slot to the next request.
  void ReplicaDone() {
    if (up_) {
      up_->ClearDeadline();
      if (upstream_keep_alive_ && up_->buffer.size() == 0) {
        worker_.PutIdle(std::move(up_));
      } else {
        up_.reset();
      }
    }
    Release();
  }

  void SendBuffered() {
    ReplicaDone();
    status_ = res_.result_int();
    PrepareClientResponseHeader(res_.base(), client_version_, revision_->label, replica_->id);
    if (!head_) res_.prepare_payload();
    res_.keep_alive(client_keep_alive_);
    client_->SetDeadline(worker_.settings().client_send_timeout_ms);
    http::async_write(
        client_->socket(), res_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->Finish(!ec); });
  }

  // 5. A long, chunked or close-delimited answer, relayed as it comes.
  void StartRelay() {
    relay_parser_.emplace(std::move(*head_parser_));
    relay_parser_->body_limit(kNoLimit);
    status_ = relay_parser_->get().result_int();
    relay_res_.emplace();
    relay_res_->base() = relay_parser_->get().base();
    PrepareClientResponseHeader(relay_res_->base(), client_version_, revision_->label,
                                replica_->id);
    relay_res_->erase(http::field::content_length);
    if (const auto length = relay_parser_->content_length()) {
      relay_res_->content_length(*length);
    } else if (client_version_ >= 11) {
      relay_res_->chunked(true);
    } else {
      client_keep_alive_ = false;  // an HTTP/1.0 client: the end of the body is the close
    }
    relay_res_->keep_alive(client_keep_alive_);
    relay_res_->body().data = nullptr;
    relay_res_->body().size = 0;
    relay_res_->body().more = true;
    relay_sr_.emplace(*relay_res_);
    relay_buf_ = std::make_unique<char[]>(kRelayBuffer);
    client_->SetDeadline(worker_.settings().client_send_timeout_ms);
    http::async_write_header(client_->socket(), *relay_sr_,
                             [self = shared_from_this()](beast::error_code ec, size_t) {
                               if (ec) return self->RelayBroken(false, ec);
                               self->RelayRead();
                             });
  }

  void RelayRead() {
    client_->ClearDeadline();
    auto& body = relay_parser_->get().body();
    body.data = relay_buf_.get();
    body.size = kRelayBuffer;
    up_->SetDeadline(worker_.settings().upstream_timeout_ms);
    http::async_read_some(
        up_->socket, up_->buffer, *relay_parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRelayRead(ec); });
  }

  void OnRelayRead(beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return RelayBroken(true, ec);
    const size_t n = kRelayBuffer - relay_parser_->get().body().size;
    const bool done = relay_parser_->is_done();
    if (n == 0) {
      if (done) return RelayLast();
      return RelayRead();
    }
    up_->ClearDeadline();
    relay_res_->body().data = relay_buf_.get();
    relay_res_->body().size = n;
    relay_res_->body().more = true;
    client_->SetDeadline(worker_.settings().client_send_timeout_ms);
    http::async_write(client_->socket(), *relay_sr_,
                      [self = shared_from_this(), done](beast::error_code e, size_t) {
                        if (e == http::error::need_buffer) e = {};
                        if (e) return self->RelayBroken(false, e);
                        if (done) return self->RelayLast();
                        self->RelayRead();
                      });
  }

  void RelayLast() {
    upstream_keep_alive_ = relay_parser_->keep_alive();
    ReplicaDone();
    relay_res_->body().data = nullptr;
    relay_res_->body().size = 0;
    relay_res_->body().more = false;
    client_->SetDeadline(worker_.settings().client_send_timeout_ms);
    http::async_write(client_->socket(), *relay_sr_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec == http::error::need_buffer) ec = {};
                        self->Finish(!ec);
                      });
  }

  // The answer was started and cannot be finished: the client's connection closes.
  void RelayBroken(bool upstream, beast::error_code) {
    if (upstream) counters_->AddUpstreamError();
    up_.reset();
    Release();
    client_->Close();
    Finish(false);
  }

  // A failed connect or a connection closed before anything came back: once more on another
  // replica. A failed connect sent nothing, so it may try up to kMaxConnectRetries others (a node
  // that died takes all its replicas at once; each one that fails is ejected, so the next pick
  // avoids it).
  static constexpr int kMaxConnectRetries = 3;
  void Retry(std::string why, bool nothing_sent = false) {
    Release();
    const bool again = nothing_sent ? connect_retries_ < kMaxConnectRetries : !retried_;
    if (!again) return UpstreamFailed(http::status::bad_gateway, std::move(why));
    if (nothing_sent) {
      ++connect_retries_;
    } else {
      retried_ = true;
    }
    counters_->AddRetry();
    exclude_ = std::move(replica_);
    revision_ = nullptr;
    last_error_ = std::move(why);
    state_ = State::kNew;
    Attempt(/*admitted=*/true);
  }

  void NoOtherReplica() {
    UpstreamFailed(http::status::bad_gateway, last_error_.empty()
                                                  ? "no replica to send the request to"
                                                  : last_error_ + "; no other replica to retry on");
  }

  void UpstreamFailed(http::status status, std::string message) {
    Release();
    if (counters_ != nullptr) counters_->AddUpstreamError();
    OwnAnswer(status, status == http::status::gateway_timeout ? "gateway_timeout" : "bad_gateway",
              message, false);
  }

  // The gateway's own 503: the queue is full, the wait is over, the service left.
  void Reject(std::string message) {
    Release();
    OwnAnswer(http::status::service_unavailable, "unavailable", message, true);
  }

  void OwnAnswer(http::status status, std::string_view code, std::string_view message,
                 bool gateway_503) {
    if (timer_) timer_->cancel();
    state_ = State::kForwarding;
    gateway_503_ = gateway_503;
    status_ = static_cast<int>(status);
    res_ = {};
    res_.result(status);
    res_.version(client_version_);
    res_.set(http::field::content_type, "application/json");
    if (revision_ != nullptr) res_.set("X-Arbiter-Revision", revision_->label);
    res_.body() = head_ ? std::string() : ErrorBody(code, message);
    res_.prepare_payload();
    res_.keep_alive(client_keep_alive_);
    client_->SetDeadline(worker_.settings().client_send_timeout_ms);
    http::async_write(
        client_->socket(), res_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->Finish(!ec); });
  }

  // 6. Counted, and the client connection goes on.
  void Finish(bool client_ok) {
    state_ = State::kDone;
    RouteCounters* c = counters_;
    if (c == nullptr && service_ != nullptr) {
      c = service_->unrouted_counters[static_cast<size_t>(worker_.index())];
    }
    if (c != nullptr) c->Record(status_, gateway_503_, MsSince(arrived_), queue_wait_ms_);
    client_->Continue(client_ok && client_keep_alive_);
    client_.reset();
  }

  std::shared_ptr<ClientConn> client_;
  Worker& worker_;
  std::shared_ptr<const Table> table_;
  const Service* service_;
  std::string name_;
  std::shared_ptr<ServiceShared> shared_;
  http::request<http::string_body> req_;
  Clock::time_point arrived_;
  unsigned client_version_ = 11;
  bool client_keep_alive_ = true;
  bool head_ = false;
  bool idempotent_ = false;

  State state_ = State::kNew;
  Clock::time_point queued_at_;
  double queue_wait_ms_ = 0;
  std::optional<Timer> timer_;
  bool expired_ = false;

  const Revision* revision_ = nullptr;
  std::shared_ptr<Replica> replica_;
  RouteCounters* counters_ = nullptr;
  bool acquired_ = false;
  bool retried_ = false;     // retried once after a replica closed the connection
  int connect_retries_ = 0;  // retries after failed connects
  bool no_candidate_ = false;
  std::shared_ptr<Replica> exclude_;
  std::string last_error_;

  std::unique_ptr<Upstream> up_;
  bool reused_ = false;
  bool upstream_keep_alive_ = false;
  std::optional<http::response_parser<http::string_body>> head_parser_;
  std::optional<http::response_parser<http::buffer_body>> relay_parser_;
  http::response<http::string_body> res_;
  std::optional<http::response<http::buffer_body>> relay_res_;
  std::optional<http::response_serializer<http::buffer_body>> relay_sr_;
  std::unique_ptr<char[]> relay_buf_;
  int status_ = 0;
  bool gateway_503_ = false;
};

void ClientConn::Dispatch() {
  ClearDeadline();
  http::request<http::string_body> req = parser_->release();
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  const auto& table = worker_.table();

  // Host routes first, then /s/NAME/..., then the gateway's own paths.
  const Service* service = nullptr;
  std::string forwarded;
  if (const auto host = table->by_host.empty() ? req.end() : req.find(http::field::host);
      host != req.end()) {
    service = table->FindByHost(NormalizeHost(host->value()));
    if (service != nullptr) forwarded = std::string(req.target());
  }
  std::string_view name;
  if (service == nullptr && SplitServiceTarget(req.target(), &name, &forwarded)) {
    service = table->FindByName(name);
    if (service == nullptr) {
      if (!table->loaded) {
        return Answer(http::status::service_unavailable, "application/json",
                      ErrorBody("unavailable", "the gateway has no routing table yet"), version,
                      keep_alive);
      }
      worker_.stats().AddUnknownService(worker_.index());
      return Answer(http::status::not_found, "application/json",
                    ErrorBody("not_found", fmt::format("no service \"{}\"", name)), version,
                    keep_alive);
    }
  }
  if (service == nullptr) {
    const std::string_view target = req.target();
    const std::string_view path = target.substr(0, target.find('?'));
    if (path == "/metrics" &&
        (req.method() == http::verb::get || req.method() == http::verb::head)) {
      return Answer(http::status::ok, "text/plain; version=0.0.4; charset=utf-8",
                    worker_.MetricsText(), version, keep_alive);
    }
    if (path == "/healthz" || path == "/readyz") {
      return Answer(http::status::ok, "application/json", "{\"ok\":true}\n", version, keep_alive);
    }
    return Answer(
        http::status::not_found, "application/json",
        ErrorBody("not_found", fmt::format("no route for \"{}\": services are under /s/NAME/ or "
                                           "at their hosts",
                                           path)),
        version, keep_alive);
  }
  auto exchange = std::make_shared<Exchange>(shared_from_this(), table, service, std::move(req),
                                             std::move(forwarded), ip_);
  exchange->Start();
}

}  // namespace

// ---------------------------------------------------------------------------------------------

Proxy::Worker::Worker(int index, const ProxySettings& settings, Stats& stats,
                      const std::function<std::string()>& metrics_text)
    : index_(index),
      settings_(settings),
      stats_(stats),
      metrics_text_(metrics_text),
      ioc_(std::make_unique<net::io_context>(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO)),
      table_(std::make_shared<Table>()),
      rng_(0x9E3779B97F4A7C15ULL ^ (static_cast<uint64_t>(index + 1) * 0xD1B54A32D192ED03ULL) ^
           static_cast<uint64_t>(Clock::now().time_since_epoch().count())) {}

Proxy::Worker::~Worker() {
  Stop();
  if (thread_.joinable()) thread_.join();
  // What the handlers own (connections, exchanges) goes with the io_context; they unlink from
  // this worker's lists, so those outlive it.
  idle_.clear();
  acceptor_.reset();
  sweep_timer_.reset();
  accept_timer_.reset();
  work_.reset();
  ioc_.reset();
}

Status Proxy::Worker::Bind(const tcp::endpoint& endpoint) {
  acceptor_.emplace(*ioc_);
  beast::error_code ec;
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) {
    // Every io thread has an acceptor on the same port: the kernel spreads new connections.
    const int one = 1;
    if (setsockopt(acceptor_->native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
      ec.assign(errno, beast::system_category());
    }
  }
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("cannot listen on {}:{}: {}", endpoint.address().to_string(),
                              endpoint.port(), ec.message()),
                  "listen");
  }
  return Status::Ok();
}

void Proxy::Worker::Start() {
  work_.emplace(ioc_->get_executor());
  sweep_timer_.emplace(*ioc_);
  accept_timer_.emplace(*ioc_);
  Accept();
  ScheduleSweep();
  thread_ = std::thread([this] { ioc_->run(); });
}

void Proxy::Worker::Stop() {
  if (!ioc_) return;
  net::post(*ioc_, [this] {
    beast::error_code ec;
    if (acceptor_) acceptor_->close(ec);
  });
  work_.reset();
  ioc_->stop();
}

void Proxy::Worker::Accept() {
  acceptor_->async_accept([this](beast::error_code ec, Socket socket) {
    if (!acceptor_->is_open()) return;
    if (ec) {
      // Out of file descriptors (or another passing failure): try again a little later
      // rather than spin.
      accept_timer_->expires_after(std::chrono::milliseconds(50));
      accept_timer_->async_wait([this](beast::error_code e) {
        if (!e && acceptor_->is_open()) Accept();
      });
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);
    std::make_shared<ClientConn>(*this, std::move(socket))->Start();
    Accept();
  });
}

void Proxy::Worker::ScheduleSweep() {
  sweep_timer_->expires_after(std::chrono::milliseconds(200));
  sweep_timer_->async_wait([this](beast::error_code ec) {
    if (ec) return;
    Sweep();
    ScheduleSweep();
  });
}

void Proxy::Worker::Sweep() {
  const int64_t now = NowMs();
  for (Timed* t = timed_head_; t != nullptr;) {
    Timed* next = t->next_;
    if (t->deadline_ms_ != 0 && t->deadline_ms_ <= now) {
      t->deadline_ms_ = 0;
      t->OnDeadline();
    }
    t = next;
  }
  // Pooled connections idle too long close; the oldest are at the front (reuse is LIFO).
  const int64_t oldest = now - settings_.upstream_idle_timeout_ms;
  for (auto it = idle_.begin(); it != idle_.end();) {
    auto& pool = it->second;
    size_t stale = 0;
    while (stale < pool.size() && pool[stale]->idle_since_ms < oldest) ++stale;
    pool.erase(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(stale));
    it = pool.empty() ? idle_.erase(it) : std::next(it);
  }
}

void Proxy::Worker::SetTable(std::shared_ptr<const Table> table) {
  table_ = std::move(table);
  // Pools of replicas that left the table close (connections in use finish first).
  std::unordered_set<uint64_t> live;
  for (const auto& s : table_->services) {
    for (const Revision& r : s->revisions) {
      for (const auto& rep : r.replicas) live.insert(rep->serial);
    }
  }
  for (auto it = idle_.begin(); it != idle_.end();) {
    it = live.count(it->first) != 0 ? std::next(it) : idle_.erase(it);
  }
}

std::unique_ptr<Upstream> Proxy::Worker::TakeIdle(uint64_t serial) {
  const auto it = idle_.find(serial);
  if (it == idle_.end()) return nullptr;
  auto& pool = it->second;
  const int64_t now = NowMs();
  while (!pool.empty()) {
    std::unique_ptr<Upstream> up = std::move(pool.back());
    pool.pop_back();
    // Still open? A connection idle for a while may have been closed by the replica (its idle
    // timeout, its end): that leaves an end of stream to read. One used a moment ago is taken
    // as it is, which spares a system call per request under load; should it have closed
    // anyway, an idempotent request on it is sent again (Exchange::OnHeader).
    if (now - up->idle_since_ms < kIdleCheckMs) return up;
    char c = 0;
    const ssize_t n = ::recv(up->socket.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return up;
  }
  return nullptr;
}

void Proxy::Worker::PutIdle(std::unique_ptr<Upstream> up) {
  auto& pool = idle_[up->serial];
  if (pool.size() >= settings_.max_idle_per_replica) return;  // closes
  up->idle_since_ms = NowMs();
  pool.push_back(std::move(up));
}

// ---------------------------------------------------------------------------------------------

Proxy::Proxy(int threads, ProxySettings settings, Stats& stats,
             std::function<std::string()> metrics_text)
    : settings_(std::move(settings)), metrics_text_(std::move(metrics_text)) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    workers_.push_back(std::make_unique<Worker>(i, settings_, stats, metrics_text_));
  }
}

Proxy::~Proxy() { Stop(); }

Status Proxy::Listen(const std::string& host, int port) {
  beast::error_code ec;
  net::ip::address address = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) {
    // A name: its first address.
    net::io_context io;
    tcp::resolver resolver(io);
    const auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      return InvalidArgument("listen", fmt::format("cannot resolve \"{}\"", host));
    }
    address = results.begin()->endpoint().address();
  }
  tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  for (size_t i = 0; i < workers_.size(); ++i) {
    ARBITER_RETURN_IF_ERROR(workers_[i]->Bind(endpoint));
    if (i == 0) {
      // The others join the port the first one got.
      port_ = workers_[0]->local_port();
      endpoint.port(static_cast<unsigned short>(port_));
    }
  }
  return Status::Ok();
}

void Proxy::Start() {
  if (started_) return;
  started_ = true;
  for (auto& w : workers_) w->Start();
}

void Proxy::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& w : workers_) w->Stop();
  workers_.clear();
}

void Proxy::Publish(std::shared_ptr<const Table> table, const Table* previous) {
  for (auto& w : workers_) {
    net::post(w->ioc(), [worker = w.get(), table] { worker->SetTable(table); });
  }
  // Waiters retry on their own thread, after it has the new table (posts run in order).
  std::vector<std::shared_ptr<ServiceShared>> queues;
  for (const Table* t : {previous, table.get()}) {
    if (t == nullptr) continue;
    for (const auto& s : t->services) queues.push_back(s->shared);
  }
  for (const auto& q : queues) {
    if (q->queue.size() == 0) continue;
    for (auto& w : q->queue.TakeAll()) {
      Waiter* raw = w.get();
      raw->Wake(std::move(w));
    }
  }
}

int64_t Proxy::open_connections() const {
  int64_t n = 0;
  for (const auto& w : workers_) n += w->clients.load(std::memory_order_relaxed);
  return n;
}

}  // namespace arbiter::gateway
