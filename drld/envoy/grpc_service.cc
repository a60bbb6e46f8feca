// drld's gRPC server: see grpc_service.h.
#include "grpc_service.h"

#include "acceptor.h"
#include "envoy_service.h"
#include "grpc_async.h"
#include "grpc_health.h"
#include "grpc_tag.h"
#include "listen_addr.h"

#include "envoy_rls.grpc.pb.h"

#include <drl/async.h>

#include <absl/container/inlined_vector.h>
#include <absl/synchronization/mutex.h>
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <linux/tcp.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace
{

namespace rls = envoy::service::ratelimit::v3;
namespace common = envoy::extensions::common::ratelimit::v3;

// The C request of one protobuf request: its entries and descriptors
// point into the protobuf message, valid while it is.
struct CRequest {
	// in place for a few descriptors, as Envoy's calls have: no
	// allocation (sized once: the pointers into them stay valid)
	absl::InlinedVector<drld_envoy_entry, 8> entries;
	absl::InlinedVector<drld_envoy_descriptor, 4> descriptors;
	drld_envoy_request q{};

	explicit CRequest(const rls::RateLimitRequest &req)
	    : entries(count_entries(req)),
	      descriptors((size_t)req.descriptors_size())
	{
		drld_envoy_entry *e = entries.data();
		drld_envoy_descriptor *cd = descriptors.data();
		for (const common::RateLimitDescriptor &d : req.descriptors()) {
			cd->entries = e;
			cd->nentries = (size_t)d.entries_size();
			for (const auto &x : d.entries())
				*e++ = {x.key().data(), x.key().size(),
					x.value().data(), x.value().size()};
			cd->has_override = d.has_limit();
			cd->override_rpu = d.limit().requests_per_unit();
			cd->override_unit = (int)d.limit().unit();
			cd->has_hits = d.has_hits_addend();
			cd->hits = d.hits_addend().value();
			cd++;
		}
		q.domain = req.domain().data();
		q.domainlen = req.domain().size();
		q.descriptors = descriptors.data();
		q.ndescriptors = (size_t)req.descriptors_size();
		q.hits_addend = req.hits_addend();
	}

      private:
	static size_t count_entries(const rls::RateLimitRequest &req)
	{
		size_t total = 0;
		for (const common::RateLimitDescriptor &d : req.descriptors())
			total += (size_t)d.entries_size();
		return total;
	}
};

// Fill the response from a decided answer.
void fill(const drld_envoy_answer &a, size_t n, rls::RateLimitResponse *resp)
{
	resp->set_overall_code((rls::RateLimitResponse_Code)a.overall);
	for (size_t i = 0; i < n; i++) {
		const drld_envoy_status &s = a.statuses[i];
		rls::RateLimitResponse_DescriptorStatus *st =
			resp->add_statuses();
		st->set_code((rls::RateLimitResponse_Code)s.code);
		st->set_limit_remaining(s.remaining);
		if (s.has_limit) {
			rls::RateLimitResponse_RateLimit *l =
				st->mutable_current_limit();
			l->set_requests_per_unit(s.requests_per_unit);
			l->set_unit(
				(rls::RateLimitResponse_RateLimit_Unit)s.unit);
			if (s.name != nullptr)
				l->set_name(s.name);
		}
		if (s.has_reset) {
			google::protobuf::Duration *d =
				st->mutable_duration_until_reset();
			d->set_seconds(s.reset_us / 1000000);
			d->set_nanos((int32_t)(s.reset_us % 1000000) * 1000);
		}
	}
	if (a.headers) {
		const struct {
			const char *name;
			long long value;
		} h[] = {
			{"RateLimit-Limit", (long long)a.header_limit},
			{"RateLimit-Remaining", (long long)a.header_remaining},
			{"RateLimit-Reset", (long long)a.header_reset_s},
		};
		for (const auto &x : h) {
			envoy::config::core::v3::HeaderValue *hv =
				resp->add_response_headers_to_add();
			hv->set_key(x.name);
			hv->set_value(std::to_string(x.value));
		}
	}
}

// The gRPC status of a call that ended with outcome o (msg: its error),
// and its response when it was decided.
grpc::Status answer(drld_envoy_outcome o, const char *msg,
		    const drld_envoy_answer &a, size_t n,
		    rls::RateLimitResponse *resp)
{
	switch (o) {
	case DRLD_ENVOY_OK:
	case DRLD_ENVOY_OVER_LIMIT:
		fill(a, n, resp);
		return grpc::Status();
	case DRLD_ENVOY_INVALID:
		return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, msg);
	case DRLD_ENVOY_UNAVAILABLE:
		return grpc::Status(grpc::StatusCode::UNAVAILABLE, msg);
	case DRLD_ENVOY_EXHAUSTED:
		return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, msg);
	default:
		return grpc::Status(grpc::StatusCode::INTERNAL, msg);
	}
}

class Deciders;
class Service;

// What drld_grpc_stop() waits for: the ShouldRateLimit calls in flight on
// every shard (from a call's arrival until its answer is sent), the calls
// posted for grpc to match that it has not handed back yet (one it matched
// is in flight from then, though its tag may not have run: while any is
// out, a call may be on its way), the shards whose shutdown has begun
// (grpc has handed back a posted call unmatched: it sent their connections
// GOAWAY then), and the shards whose Shutdown() returned. Thread-safe.
class Drain
{
      public:
	void posted()
	{
		std::lock_guard<std::mutex> l(m_);
		posted_++;
	}
	// a posted call handed back: matched (ok: in flight) or not
	void arrived(bool ok)
	{
		std::lock_guard<std::mutex> l(m_);
		posted_--;
		calls_ += ok;
		cv_.notify_all();
	}
	void leave()
	{
		std::lock_guard<std::mutex> l(m_);
		if (--calls_ == 0)
			cv_.notify_all();
	}
	void shutdown_began()
	{
		std::lock_guard<std::mutex> l(m_);
		began_++;
		cv_.notify_all();
	}
	void stopped()
	{
		std::lock_guard<std::mutex> l(m_);
		stopped_++;
		cv_.notify_all();
	}

	// Wait until the n shards have stopped (true), or until their
	// shutdown has begun, grpc has handed back every posted call and
	// none is in flight, or `deadline` (false: connections still open,
	// idle ones or calls past it).
	bool wait(size_t n, std::chrono::system_clock::time_point deadline)
	{
		std::unique_lock<std::mutex> l(m_);
		cv_.wait_until(l, deadline, [&] {
			return stopped_ == n ||
			       (began_ == n && posted_ == 0 && calls_ == 0);
		});
		return stopped_ == n;
	}

      private:
	std::mutex m_;
	std::condition_variable cv_;
	long calls_ = 0, posted_ = 0;
	size_t began_ = 0, stopped_ = 0;
};

// One ShouldRateLimit call on grpc++'s completion-queue API, from the
// request drld posts for it until grpc has delivered every tag of it.
// Its request and response live on a protobuf Arena whose first block is
// part of the call: one allocation per call, instead of one per message,
// string and repeated field of both.
//
// Life: Call::expect() posts it (grpc matches the next incoming call to
// it: arrived); Service::handle() decides it inline, starts it through
// the async context, or queues it for a decider; whoever decides calls
// finish() exactly once, from any thread; the finished tag (and, for a
// call a decider may skip, the done tag) end it.
class Call final : public GrpcShared<Call>
{
      public:
	// Post one call for grpc to match on cq. Throws std::bad_alloc.
	static void expect(Service *s, grpc::ServerCompletionQueue *cq);

	// Answer the call with st (and the response when st is OK).
	// Exactly once, from any thread.
	void finish(const grpc::Status &st)
	{
		hold(); // the finished tag may be run before Finish returns
		responder_.Finish(*resp_, st, finished_.post());
		release();
	}

	// The service (of one shard) that matched the call.
	Service *service() const
	{
		return s_;
	}

	// Whether the caller has given up on the call: its deadline has
	// passed (Envoy's timeout, sent as grpc-timeout), or, for a call
	// watched for it, grpc has cancelled it (a reset stream).
	bool gone() const
	{
		return cancelled_.load(std::memory_order_acquire) ||
		       ctx_.deadline() < std::chrono::system_clock::now();
	}

	const rls::RateLimitRequest &request() const
	{
		return *req_;
	}
	rls::RateLimitResponse *response()
	{
		return resp_;
	}

	// A call is ~4 KiB, beyond glibc's per-thread cache of small
	// blocks (tcache, up to 1 KiB), and one is made and freed per
	// request: each thread keeps up to kCallCache freed ones for the
	// calls it makes next (the pollers make them; pollers, deciders or
	// the async context's callbacks free them).
	static void *operator new(size_t n);
	static void operator delete(void *p);

      private:
	Call(Service *s, grpc::ServerCompletionQueue *cq);

	static google::protobuf::ArenaOptions options(char *block, size_t n)
	{
		google::protobuf::ArenaOptions o;
		o.initial_block = block;
		o.initial_block_size = n;
		return o;
	}

	void arrived(bool ok);
	void finished(bool); // the answer is sent
	// the done tag: IsCancelled() may be asked from here on
	void done(bool)
	{
		cancelled_.store(ctx_.IsCancelled(), std::memory_order_release);
		release();
	}

	Service *s_;
	grpc::ServerCompletionQueue *cq_;
	alignas(std::max_align_t) char block_[2048]; // before arena_
	google::protobuf::Arena arena_;
	grpc::ServerContext ctx_;
	grpc::ServerAsyncResponseWriter<rls::RateLimitResponse> responder_;
	rls::RateLimitRequest *req_;
	rls::RateLimitResponse *resp_;
	GrpcTag arrived_ = grpc_tag<Call, &Call::arrived>(this);
	GrpcTag finished_ = grpc_tag<Call, &Call::finished>(this);
	GrpcTag done_ = grpc_tag<Call, &Call::done>(this);
	std::atomic<bool> cancelled_{false};
};

// Calls posted per shard before any arrives: incoming calls beyond them
// wait in grpc until its poller posts the next (at once, as each arrives).
constexpr unsigned kPostedPerShard = 32;

// The service: what to do with each call grpc matches. A call is decided
// on the poller that read it when decisions never wait for the network
// (memory://), so no thread is woken per call; on a store whose calls
// can be started (Redis tx=lua on shared connections) it is started
// there and a poller finishes it once the store has answered
// (grpc_async.h); otherwise it is handed to the deciders, which block in
// the store and finish the call themselves.
class Service
{
      public:
	Service(struct drld *d, Drain *drain) : d_(d), drain_(drain)
	{
	}

	Drain *drain() const
	{
		return drain_;
	}

	// The first call grpc hands back unmatched: the server's shutdown
	// began (once per shard).
	void shutdown_began()
	{
		if (!began_.exchange(true))
			drain_->shutdown_began();
	}

	rls::RateLimitService::AsyncService &rpc()
	{
		return rpc_;
	}

	void set_deciders(Deciders *p)
	{
		deciders_ = p;
	}

	void set_async(drl_async *a)
	{
		async_ = a;
	}

	// Whether calls are watched for cancellation (AsyncNotifyWhenDone:
	// one more event per call): only where a call may wait for a
	// decider, the one place a cancelled call is skipped, and only
	// where every call may (a store none of whose calls start
	// through the async context). A call handed back to the
	// deciders on such a store is skipped by its deadline alone.
	bool watch_cancel() const
	{
		return deciders_ != nullptr && async_ == nullptr;
	}

	// A call grpc has matched: decide it, start it, or queue it.
	void handle(Call *c);

	// Finish a call that was never decided, counting outcome o.
	void refuse(Call *c, drld_envoy_outcome o, grpc::StatusCode code,
		    const char *why)
	{
		drld_envoy_not_decided(d_, o);
		c->finish(grpc::Status(code, why));
	}

	// Decide the call and finish it (exactly once).
	void decide_and_finish(Call *c)
	{
		grpc::Status st;
		try {
			st = decide(c->request(), c->response());
		} catch (const std::bad_alloc &) {
			st = grpc::Status(grpc::StatusCode::INTERNAL,
					  "out of memory");
		}
		c->finish(st);
	}

      private:
	grpc::Status decide(const rls::RateLimitRequest &req,
			    rls::RateLimitResponse *resp)
	{
		CRequest c(req);
		absl::InlinedVector<drld_envoy_status, 5> statuses(
			c.q.ndescriptors + 1);
		drld_envoy_answer a{};
		char msg[512] = "";

		a.statuses = statuses.data();
		drld_envoy_outcome o =
			drld_envoy_decide(d_, &c.q, &a, msg, sizeof msg);
		grpc::Status st = answer(o, msg, a, c.q.ndescriptors, resp);
		drld_envoy_answer_release(&a);
		return st;
	}

	// Start deciding the call through the async context when its
	// store calls need no worker; false when they would (the caller
	// uses the deciders then).
	bool start_async(Call *c);

	static void async_done(void *arg, drld_envoy_outcome o,
			       const char *msg);

	struct drld *d_;
	Drain *drain_;
	std::atomic<bool> began_{false};
	rls::RateLimitService::AsyncService rpc_;
	Deciders *deciders_ = nullptr; // null: decide inline
	drl_async *async_ = nullptr;   // null: no call goes async
};

// Freed calls' memory kept by one thread (Call::operator new). None under
// ASan, whose use-after-free checks need every call freed for real.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kCallCache = 0;
#else
constexpr size_t kCallCache = 64;
#endif
struct CallCache {
	void *free[kCallCache + 1];
	size_t n = 0;

	~CallCache()
	{
		while (n > 0)
			::operator delete(free[--n]);
	}
};
thread_local CallCache call_cache;

void *Call::operator new(size_t n)
{
	// only Calls come here, all of one size
	if (call_cache.n > 0)
		return call_cache.free[--call_cache.n];
	return ::operator new(n);
}

void Call::operator delete(void *p)
{
	if (call_cache.n < kCallCache)
		call_cache.free[call_cache.n++] = p;
	else
		::operator delete(p);
}

Call::Call(Service *s, grpc::ServerCompletionQueue *cq)
    : GrpcShared(1), // the finished tag
      s_(s), cq_(cq), arena_(options(block_, sizeof block_)), responder_(&ctx_)
{
	req_ = google::protobuf::Arena::CreateMessage<rls::RateLimitRequest>(
		&arena_);
	resp_ = google::protobuf::Arena::CreateMessage<rls::RateLimitResponse>(
		&arena_);
	if (s->watch_cancel()) {
		set(2); // the finished and the done tag
		ctx_.AsyncNotifyWhenDone(done_.post());
	}
	s->drain()->posted();
	s->rpc().RequestShouldRateLimit(&ctx_, req_, &responder_, cq, cq,
					arrived_.post());
}

void Call::expect(Service *s, grpc::ServerCompletionQueue *cq)
{
	new Call(s, cq);
}

void Call::arrived(bool ok)
{
	if (!ok) {
		// the server is shutting down and this call never began:
		// grpc delivers no done tag for it (grpc issue 10136)
		s_->shutdown_began();
		s_->drain()->arrived(false);
		delete this;
		return;
	}
	try {
		expect(s_, cq_); // the next call on this queue
	} catch (const std::bad_alloc &) {
		// this queue has one posted call less; the others carry on
	}
	s_->drain()->arrived(true); // after the next is posted
	s_->handle(this);
}

void Call::finished(bool)
{
	s_->drain()->leave();
	release();
}

// A call started through the async context: what drld_envoy_start()
// reads and writes until its done callback, and the call to finish.
struct AsyncCall {
	CRequest c;
	absl::InlinedVector<drld_envoy_status, 5> statuses;
	drld_envoy_answer a{};
	Call *call;

	explicit AsyncCall(Call *cl)
	    : c(cl->request()), statuses(c.q.ndescriptors + 1), call(cl)
	{
		a.statuses = statuses.data();
	}
};

bool Service::start_async(Call *cl)
{
	std::unique_ptr<AsyncCall> call(new AsyncCall(cl));
	int rc = drld_envoy_start(d_, async_, &call->c.q, &call->a, async_done,
				  call.get());
	if (rc > 0)
		return false; // a limit needs a worker: the deciders
	if (rc < 0)
		throw std::bad_alloc();
	call.release(); // async_done deletes it
	return true;
}

// The end of a started call (on the async loop's thread, or inside
// drld_envoy_start): answer it and let it go. Never throws into C.
void Service::async_done(void *arg, drld_envoy_outcome o, const char *msg)
{
	std::unique_ptr<AsyncCall> call(static_cast<AsyncCall *>(arg));
	grpc::Status st;
	try {
		st = answer(o, msg, call->a, call->c.q.ndescriptors,
			    call->call->response());
	} catch (const std::bad_alloc &) {
		st = grpc::Status(grpc::StatusCode::INTERNAL, "out of memory");
	}
	drld_envoy_answer_release(&call->a);
	call->call->finish(st);
}

// The deciders: a fixed set of threads and a bounded queue of calls
// waiting for one. Hand-written rather than drl_async: a drl_async
// callback runs on the thread that calls drl_async_process(), one more
// wake-up per call, where a decider can finish the call itself.
class Deciders
{
      public:
	Deciders(unsigned n, size_t queue) : max_(queue)
	{
		for (unsigned i = 0; i < n; i++)
			threads_.emplace_back([this] { run(); });
	}

	// Lets the threads finish the queue, then joins them.
	~Deciders()
	{
		{
			std::lock_guard<std::mutex> l(m_);
			stop_ = true;
		}
		cv_.notify_all();
		for (std::thread &t : threads_)
			t.join();
	}

	// How many deciders are in a store call now.
	int busy() const
	{
		return busy_.load(std::memory_order_acquire);
	}

	// Queue a call; false when the queue is full (--grpc-queue).
	bool push(Call *c)
	{
		std::lock_guard<std::mutex> l(m_);
		if (q_.size() >= max_)
			return false;
		q_.push_back(c);
		// under the lock: once a decider has finished the call, the
		// server may stop and these deciders go (drld_grpc_stop)
		// while a notify after the unlock would still touch cv_
		cv_.notify_one();
		return true;
	}

      private:
	void run()
	{
		(void)pthread_setname_np(pthread_self(), "drld-decider");
		for (;;) {
			Call *c;
			{
				std::unique_lock<std::mutex> l(m_);
				cv_.wait(l, [this] {
					return stop_ || !q_.empty();
				});
				if (q_.empty())
					return;
				c = q_.front();
				q_.pop_front();
			}
			// A call whose caller has given up (Envoy's
			// timeout, 20 ms by default, passed while it
			// waited) costs no store round trip: under a
			// backlog the deciders catch up instead of
			// deciding for nobody.
			if (c->gone())
				c->service()->refuse(
					c, DRLD_ENVOY_CANCELLED,
					grpc::StatusCode::CANCELLED,
					"the caller gave up before a "
					"decider was free");
			else {
				busy_.fetch_add(1, std::memory_order_acq_rel);
				c->service()->decide_and_finish(c);
				busy_.fetch_sub(1, std::memory_order_acq_rel);
			}
		}
	}

	const size_t max_; // most calls waiting
	std::mutex m_;
	std::condition_variable cv_;
	std::deque<Call *> q_;
	bool stop_ = false;
	std::atomic<int> busy_{0};
	std::vector<std::thread> threads_;
};

void Service::handle(Call *c)
{
	try {
		if (async_ != nullptr && start_async(c))
			return;
		if (deciders_ == nullptr)
			decide_and_finish(c);
		else if (!deciders_->push(c))
			refuse(c, DRLD_ENVOY_EXHAUSTED,
			       grpc::StatusCode::RESOURCE_EXHAUSTED,
			       "too many calls waiting for the store");
	} catch (const std::bad_alloc &) {
		// thrown before the call was started, decided or queued
		c->finish(grpc::Status(grpc::StatusCode::INTERNAL,
				       "out of memory"));
	}
}

// A client certificate must name `san` in its subjectAltName (after the
// chain's own verification against the client CA): envoyproxy/ratelimit's
// GRPC_CLIENT_TLS_SAN, so that of all the certificates a shared CA signs
// only one identity (Envoy's) may call. Exact match, any kind of name.
class SanVerifier final : public grpc::experimental::ExternalCertificateVerifier
{
      public:
	explicit SanVerifier(std::string san) : san_(std::move(san))
	{
	}

	// Decided here, synchronously (true), in *status.
	bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest *r,
		    std::function<void(grpc::Status)>,
		    grpc::Status *status) override
	{
		*status = names(r) ? grpc::Status::OK
				   : grpc::Status(
					     grpc::StatusCode::UNAUTHENTICATED,
					     "the client certificate does "
					     "not name " +
						     san_);
		return true;
	}

	void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest *)
		override
	{
	}

      private:
	// Whether the certificate's subjectAltName holds san_.
	bool names(grpc::experimental::TlsCustomVerificationCheckRequest *r)
	{
		for (const auto &kind : {r->dns_names(), r->uri_names(),
					 r->ip_names(), r->email_names()})
			for (const grpc::string_ref &n : kind)
				if (n.size() == san_.size() &&
				    std::equal(n.begin(), n.end(),
					       san_.begin()))
					return true;
		return false;
	}

	const std::string san_;
};

} // namespace

// One shard of the server: a grpc::Server with its own completion queue,
// polled by one poller, which decides or starts, answers and writes every
// call of the connections dealt to the shard (who reads their bytes:
// grpc_service.h). A connection's calls complete on its shard's queue:
// no other shard's poller answers them. Shards share the deciders and drld's store,
// config and metrics; each has its own async context (at most
// --grpc-queue decisions in flight on each).
//
// Destroyed in the reverse order of its members, as grpc asks: the async
// context (its alarm) before the server, the server before its queue, and
// both before the services they were given.
struct Shard {
	std::unique_ptr<Service> service;
	std::unique_ptr<GrpcHealth> health;
	std::unique_ptr<grpc::ServerCompletionQueue> queue;
	std::unique_ptr<grpc::Server> server;
	std::unique_ptr<GrpcAsync> async; // null: no call goes async
	std::thread poller;               // not joinable: none started
};

namespace
{

// A descriptor of drld's own for the socket grpc holds as `fd`, when
// `fd` still names the socket of inode `ino`; -1 when grpc has closed it
// (the kernel may have given the number to another file meanwhile: an
// HTTP client's socket, a store connection). Every look goes through
// this copy, so nothing is read from, or shut down on, a socket that is
// not the one dealt. Its own function so that tests/fixtures/tsan_grpc.supp can
// name it: grpc closes its descriptors inside libgrpc, where
// ThreadSanitizer does not look, so TSan reports this dup as racing
// with the next accept or open that is given the same number.
__attribute__((noinline)) static int dealt_dup(int fd, ino_t ino)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (d < 0)
		return -1;
	struct stat st;
	if (fstat(d, &st) != 0 || st.st_ino != ino) {
		close(d);
		return -1;
	}
	return d;
}

// The plaintext gRPC connections drld's acceptor dealt to grpc, and the
// bytes each had received at the last look: which one floods. A
// connection is known by its descriptor and the socket's inode, so a
// descriptor that grpc closed and the kernel gave to another socket is
// never taken for it (it is forgotten at the next look: dealt_dup).
class Dealt
{
      public:
	// A connection dealt to grpc (before grpc may close it).
	void add(int fd)
	{
		struct stat st;
		if (fstat(fd, &st) != 0)
			return;
		std::lock_guard<std::mutex> l(m_);
		conns_.push_back({fd, st.st_ino, received(fd), 0});
	}

	// Look at every connection: forget those grpc closed and note what
	// each received since the last look. When the heap grew by
	// `grown` bytes meanwhile, at least kFloodRatio times what they all
	// received, the one that received the most, if more than
	// kFloodBytes, floods in this look; one that floods in kFloodLooks
	// looks in a row is shut down: grpc then closes it and stops
	// reading its streams. (A look alone could be one large allocation
	// of the store's, such as a hash table's growth, beside a busy but
	// honest connection; a flood goes on.) Returns what that one
	// received, or 0 when none was cut.
	uint64_t look(size_t grown)
	{
		std::lock_guard<std::mutex> l(m_);
		size_t top = conns_.size();
		int top_fd = -1; // drld's own copy of the top one's socket
		uint64_t top_delta = 0, all = 0;
		for (size_t i = 0; i < conns_.size();) {
			Conn &c = conns_[i];
			int d = dealt_dup(c.fd, c.ino);
			if (d < 0) {
				// the last one, not looked at yet, to i
				// (top, looked at, is before i)
				c = conns_.back();
				conns_.pop_back();
				continue;
			}
			uint64_t now = received(d);
			uint64_t delta = now > c.bytes ? now - c.bytes : 0;
			c.bytes = now;
			all += delta;
			if (delta > top_delta) {
				if (top_fd >= 0)
					close(top_fd);
				top = i;
				top_fd = d;
				top_delta = delta;
			} else {
				close(d);
			}
			i++;
		}
		bool flood = top_fd >= 0 && top_delta > kFloodBytes &&
			     grown / kFloodRatio >= all;
		for (size_t i = 0; i < conns_.size(); i++)
			if (!flood || i != top)
				conns_[i].floods = 0;
		if (!flood || ++conns_[top].floods < kFloodLooks) {
			if (top_fd >= 0)
				close(top_fd);
			return 0;
		}
		(void)shutdown(top_fd, SHUT_RDWR);
		close(top_fd);
		conns_[top] = conns_.back();
		conns_.pop_back();
		return top_delta;
	}

	// bytes a connection may receive in a look (HeapWatch::kLookMs)
	// of heap growth before it is taken for the flood: 1 MiB a second
	static constexpr uint64_t kFloodBytes = (1u << 20) / 10;
	// heap growth per byte received that is a flood: a call costs its
	// size on the heap while it is decided and then nothing but the
	// new keys it makes (a few hundred bytes; under 2 bytes per byte
	// received), a reset stream 5-12 KiB for its 100-odd bytes (40 and
	// more)
	static constexpr uint64_t kFloodRatio = 8;
	static constexpr int kFloodLooks = 2;

      private:
	struct Conn {
		int fd;
		ino_t ino;
		uint64_t bytes; // received at the last look
		int floods;     // looks in a row it flooded in
	};

	// Bytes the socket has received (0: not TCP, a unix socket).
	static uint64_t received(int fd)
	{
		struct tcp_info ti;
		socklen_t n = sizeof ti;
		memset(&ti, 0, sizeof ti);
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &n) != 0 ||
		    n < offsetof(struct tcp_info, tcpi_bytes_received) +
				    sizeof ti.tcpi_bytes_received)
			return 0;
		return ti.tcpi_bytes_received;
	}

	std::mutex m_;
	std::vector<Conn> conns_;
};

// Ten times a second: cuts a flooding gRPC connection while the heap
// grows fast, and gives the heap's free memory back to the system.
//
// Rapid reset (HEADERS then RST_STREAM, over and over on one connection:
// CVE-2023-44487) makes grpc 1.51 create a call of 7-12 KiB for every
// stream (its arena, in Server::ChannelData::AcceptStream) and free those
// of reset streams later, on its own threads, slower than a client can
// open them: 150,000 streams held 1.3 GB at once, none of them a call
// drld saw, and grpc 1.51 has no setting against it (grpc 1.59 and 1.60
// added max_requests_per_read and RST_STREAM pushback). So: when the heap
// in use grows by more than kFloodGrowth in a look, and by more than
// Dealt::kFloodRatio times what the plaintext connections received in
// it, the one that received the most (over Dealt::kFloodBytes) floods;
// one that floods in two looks in a row is shut down (Dealt): a flood is
// stopped within a few looks of it.
//
// Why ten times a second: a flood grows the heap by up to 300 MiB a
// second on this project's 2-core machine when grpc's threads are
// starved, so a look a second let one connection reach 1 GB before it
// was cut. A look is one mallinfo2() (microseconds on drld's heap in
// normal use) and one TCP_INFO per plaintext gRPC connection.
//
// And grpc frees them all in the end, but glibc keeps what was freed in
// its arenas: drld stayed at its peak after the client had gone.
// malloc_trim() returns the free pages of every arena when more than
// kTrimAbove bytes are free (docs/security.md, "drld under attack").
class HeapWatch
{
      public:
	static constexpr size_t kTrimAbove = 64u << 20;
	static constexpr int kLookMs = 100;
	static constexpr int kLooksPerSecond = 1000 / kLookMs;
	// heap growth in a look that may be a flood: 16 MiB a second
	static constexpr size_t kFloodGrowth = (16u << 20) / kLooksPerSecond;

	explicit HeapWatch(Dealt *dealt)
	    : dealt_(dealt), thread_([this] { run(); })
	{
	}

	~HeapWatch()
	{
		{
			std::lock_guard<std::mutex> l(m_);
			stop_ = true;
		}
		wake_.notify_one();
		thread_.join();
	}

      private:
	void run()
	{
		(void)pthread_setname_np(pthread_self(), "drld-heap");
		std::unique_lock<std::mutex> l(m_);
		size_t last_used = 0;
		// free bytes stay counted once their pages are returned: a
		// trim that returns nothing waits twice as long for the next
		// (at most 64 s), so a heap with a large free part that is
		// already returned is not walked every second. Counted in
		// looks.
		int trim_wait = kLooksPerSecond, trim_in = kLooksPerSecond;
		while (!wake_.wait_for(l, std::chrono::milliseconds(kLookMs),
				       [this] { return stop_; })) {
			struct mallinfo2 mi = mallinfo2();
			size_t used = mi.uordblks + mi.hblkhd;
			size_t grown = last_used != 0 && used > last_used
					       ? used - last_used
					       : 0;
			last_used = used;
			uint64_t cut =
				dealt_->look(grown > kFloodGrowth ? grown : 0);
			if (cut != 0)
				fprintf(stderr,
					"drld: grpc: the heap grew by %zu KiB "
					"in %d ms: closed the connection that "
					"sent %llu KiB in them (an HTTP/2 "
					"rapid reset?)\n",
					grown >> 10, kLookMs,
					(unsigned long long)(cut >> 10));
			if (--trim_in > 0)
				continue;
			if (mi.fordblks <= kTrimAbove || malloc_trim(0))
				trim_wait = kLooksPerSecond;
			else
				trim_wait = std::min(trim_wait * 2,
						     64 * kLooksPerSecond);
			trim_in = trim_wait;
		}
	}

	Dealt *dealt_;
	std::mutex m_;
	std::condition_variable wake_;
	bool stop_ = false;
	std::thread thread_; // last: starts once the rest is made
};

} // namespace

struct drld_grpc {
	Drain stopping; // before the shards, whose services point to it
	std::unique_ptr<Deciders> deciders; // null: decisions inline
	std::vector<std::unique_ptr<Shard>> shards;
	// plaintext: drld's own listener, which deals connections to the
	// shards in turn (acceptor.h); null with TLS, where every shard's
	// server listens on the port itself (SO_REUSEPORT: the kernel
	// deals), since grpc 1.51 takes descriptors for plaintext only
	drld_acceptor *acceptor = nullptr;
	size_t next = 0; // the shard the acceptor deals to next
	struct drld *d;
	int port = 0;
	// last, so destroyed first: the watch's thread stops before
	// anything it looks at goes
	Dealt dealt;
	HeapWatch watch{&dealt};

	explicit drld_grpc(struct drld *drld) : d(drld)
	{
	}

	// Stops what started, in the order grpc asks: new connections,
	// the servers (each waits for its calls in flight: its poller,
	// the deciders and its async context finish them), whoever may
	// still finish a call, then the queues, drained by the pollers (or
	// here, for a shard whose poller never started), then what their
	// last tags touch.
	~drld_grpc()
	{
		drld_acceptor_stop(acceptor);
		auto now = std::chrono::system_clock::now();
		for (auto &s : shards)
			if (s->server != nullptr)
				s->server->Shutdown(now);
		for (auto &s : shards)
			if (s->server != nullptr)
				s->server->Wait();
		for (auto &s : shards)
			if (s->async != nullptr)
				s->async->stop();
		deciders.reset();
		for (auto &s : shards) {
			if (s->queue == nullptr)
				continue;
			s->queue->Shutdown();
			if (s->poller.joinable())
				s->poller.join();
			else
				drain(s->queue.get());
		}
		shards.clear();
	}

	// Run every event of q until it is shut down and empty.
	static void drain(grpc::ServerCompletionQueue *q)
	{
		(void)pthread_setname_np(pthread_self(), "drld-grpc");
		void *tag;
		bool ok;
		while (q->Next(&tag, &ok))
			GrpcTag::run(tag, ok);
	}

	// The acceptor's callback: the next shard takes the connection.
	static void deal(void *arg, int fd)
	{
		drld_grpc *g = static_cast<drld_grpc *>(arg);
		size_t i = g->next++ % g->shards.size();
		drld_envoy_connection_dealt(g->d, (unsigned)i);
		g->dealt.add(fd);
		grpc::AddInsecureChannelFromFd(g->shards[i]->server.get(), fd);
	}

	// The acceptor's other callback: a connection closed undealt.
	static void closed(void *arg, enum drld_closed_reason why)
	{
		drld_grpc *g = static_cast<drld_grpc *>(arg);
		drld_envoy_connection_closed(g->d, why);
	}
};

// Plaintext, or TLS from o's PEM files, which grpc's file watcher reads
// again every tls_refresh_s seconds, asking clients for a certificate
// signed by tls_client_ca when there is one. A key and certificate that
// do not match (one file replaced, not yet the other) fail new
// handshakes, with grpc's log line, until they match again: grpc 1.51
// does not keep the last good pair (docs/envoy.md, "TLS"). Its TLS
// credentials API is marked experimental in 1.51; it is the one that
// reloads certificates.
static std::shared_ptr<grpc::ServerCredentials> credentials(
	const struct drld_grpc_opts *o)
{
	namespace gx = grpc::experimental;
	if (o->tls_cert == nullptr)
		return grpc::InsecureServerCredentials();
	bool mutual = o->tls_client_ca != nullptr;
	auto files = std::make_shared<gx::FileWatcherCertificateProvider>(
		o->tls_key, o->tls_cert, mutual ? o->tls_client_ca : "",
		o->tls_refresh_s);
	gx::TlsServerCredentialsOptions t(files);
	t.watch_identity_key_cert_pairs();
	if (mutual) {
		t.watch_root_certs();
		t.set_cert_request_type(
			GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
		if (o->tls_client_san != nullptr)
			t.set_certificate_verifier(
				gx::ExternalCertificateVerifier::Create<
					SanVerifier>(o->tls_client_san));
	} else {
		t.set_cert_request_type(
			GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
	}
	return gx::TlsServerCredentials(t);
}

// addr with its port replaced by port: "127.0.0.1:0" -> "127.0.0.1:PORT",
// so further TLS shards listen where the first did.
static std::string with_port(const char *addr, int port)
{
	std::string a(addr);
	return a.substr(0, a.rfind(':') + 1) + std::to_string(port);
}

// Build and start one more shard: its service, health service and queue on a
// server that listens on `listen` with creds (TLS: the port SO_REUSEPORT
// lets every shard share) or on no port (plaintext: the acceptor deals it
// its connections); *port: the port bound. Throws; the shard is in g either
// way, so g's destructor stops what started.
static void start_shard(drld_grpc *g, struct drld *d,
			const struct drld_grpc_opts *o,
			const std::string *listen,
			const std::shared_ptr<grpc::ServerCredentials> &creds,
			int *port)
{
	g->shards.emplace_back(new Shard);
	Shard &s = *g->shards.back();
	grpc::ServerBuilder b;
	// nobody can ask drld for channelz: do not keep its books
	b.AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);
	if (o->max_connection_age_s > 0)
		b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
				     (int)o->max_connection_age_s * 1000);
	if (o->max_connection_age_grace_s > 0)
		b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
				     (int)o->max_connection_age_grace_s * 1000);
	if (o->max_connection_idle_s > 0)
		b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
				     (int)o->max_connection_idle_s * 1000);
	s.service.reset(new Service(d, &g->stopping));
	if (g->deciders != nullptr) {
		s.service->set_deciders(g->deciders.get());
		// a store that decides without blocking (Redis tx=lua on
		// shared connections): its calls are started on the poller
		// and end on it (grpc_async.h)
		if (drld_envoy_store_direct(d)) {
			s.async.reset(new GrpcAsync(o->queue));
			s.service->set_async(s.async->context());
		}
	}
	if (listen != nullptr) {
		b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 1);
		// grpc's own listener (TLS): a connection that does not
		// finish its handshake in time is closed, as drld's
		// acceptor closes one without its preface (default 120 s)
		b.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
				     (int)o->preface_timeout_s * 1000);
		b.AddListeningPort(*listen, creds, port);
	}
	b.RegisterService(&s.service->rpc());
	// grpc.health.v1.Health: what Envoy's grpc_health_check and
	// Kubernetes' grpc probes ask (envoyproxy/ratelimit serves it too).
	// "" (the server as a whole), the service by its full name, and by
	// the name envoyproxy/ratelimit registers ("ratelimit"), so an
	// existing health check config keeps working.
	s.health.reset(new GrpcHealth(
		{"", rls::RateLimitService::service_full_name(), "ratelimit"}));
	b.RegisterService(s.health->service());
	s.queue = b.AddCompletionQueue();
	s.server = b.BuildAndStart();
	if (s.server == nullptr || (listen != nullptr && *port == 0))
		throw std::runtime_error("cannot listen (the address is in "
					 "use, or not one of this host)");
	if (s.async != nullptr)
		s.async->attach(s.queue.get());
	for (unsigned i = 0; i < kPostedPerShard; i++)
		Call::expect(s.service.get(), s.queue.get());
	s.health->expect(s.queue.get());
	s.poller = std::thread(drld_grpc::drain, s.queue.get());
}

extern "C" int drld_grpc_start(struct drld_grpc **out, struct drld *d,
			       const char *addr, const struct drld_grpc_opts *o,
			       char *msg, size_t n)
{
	*out = nullptr;
	try {
		std::unique_ptr<drld_grpc> g(new drld_grpc(d));
		// Debian's abseil is built without NDEBUG, so every
		// absl::Mutex grpc takes also updated a lock graph for
		// deadlock detection (~7% of drld's CPU per call,
		// docs/performance.md "drld over gRPC"); that is a debugging
		// aid, off in release builds of abseil
		absl::SetMutexDeadlockDetectionMode(
			absl::OnDeadlockCycle::kIgnore);
		if (o->deciders > 0)
			g->deciders.reset(new Deciders(o->deciders, o->queue));
		unsigned shards = o->pollers > 0 ? o->pollers
						 : drld_grpc_pollers_default();
		if (o->tls_cert == nullptr) {
			for (unsigned i = 0; i < shards; i++)
				start_shard(g.get(), d, o, nullptr, nullptr,
					    nullptr);
			drld_envoy_shards(d, shards);
			if (drld_acceptor_start(
				    &g->acceptor, addr, o->preface_timeout_s,
				    drld_grpc::deal, drld_grpc::closed, g.get(),
				    msg, n) != 0)
				return -1; // g's destructor stops the shards
			g->port = (int)drld_acceptor_port(g->acceptor);
		} else {
			// a unix socket's path cannot be bound twice
			if (drld_is_unix_listen(addr))
				shards = 1;
			std::string listen(addr);
			// one set of credentials (one file watcher) for all
			auto creds = credentials(o);
			for (unsigned i = 0; i < shards; i++) {
				start_shard(g.get(), d, o, &listen, creds,
					    &g->port);
				listen = with_port(addr, g->port);
			}
		}
		*out = g.release();
		return 0;
	} catch (const std::exception &e) {
		std::snprintf(msg, n, "%s", e.what());
		return -1;
	}
}

extern "C" unsigned drld_grpc_pollers_default(void)
{
	// the CPUs drld may run on (taskset, a container's cpuset), not
	// all the host has
	cpu_set_t set;
	unsigned cpus = sched_getaffinity(0, sizeof set, &set) == 0
				? (unsigned)CPU_COUNT(&set)
				: std::thread::hardware_concurrency();
	return std::max(1u, std::min(8u, cpus));
}

extern "C" unsigned drld_grpc_port(const struct drld_grpc *g)
{
	return (unsigned)g->port;
}

extern "C" bool drld_grpc_stop(struct drld_grpc *g, unsigned timeout_s)
{
	if (g == nullptr)
		return true;
	// no new connections; then NOT_SERVING for every name: a health
	// watcher (Envoy's, a load balancer's) learns drld is draining
	// while the calls in flight finish
	drld_acceptor_stop(g->acceptor);
	g->acceptor = nullptr;
	for (auto &s : g->shards)
		s->health->shutdown();
	// Each server's Shutdown sends its connections GOAWAY and waits,
	// until timeout_s (one deadline for every shard), for their calls
	// in flight, then cancels them. It also waits for each connection's
	// GOAWAY handshake (grpc 1.51's graceful GOAWAY: a PING the client
	// must answer, else 20 s): a client that holds an idle connection
	// and does not read (a grpcio channel nobody polls: ~5 s, issue 32)
	// held the stop that long. So the servers stop on threads of their
	// own, and once every shutdown has begun and no call is in flight
	// the connections left are closed (grpc_server_cancel_all_calls):
	// the stop takes as long as the calls in flight, not the clients'
	// idle connections. Health watches are no call here: they end then.
	auto deadline = std::chrono::system_clock::now() +
			std::chrono::seconds(timeout_s);
	std::vector<std::thread> stoppers;
	for (auto &s : g->shards) {
		grpc::Server *server = s->server.get();
		Drain *drain = &g->stopping;
		stoppers.emplace_back([server, drain, deadline] {
			server->Shutdown(deadline);
			drain->stopped();
		});
	}
	if (!g->stopping.wait(g->shards.size(), deadline))
		for (auto &s : g->shards)
			grpc_server_cancel_all_calls(s->server->c_server());
	// a decider still in a store call (a stalled store on the blocking
	// path) holds its call, so the servers' shutdowns and the deciders'
	// join until the store's timeout_ms: its caller has its CANCELLED,
	// leave the rest to the exit
	int busy = g->deciders != nullptr ? g->deciders->busy() : 0;
	if (busy != 0) {
		fprintf(stderr,
			"drld: %d gRPC call%s still waiting for the store "
			"after "
			"--drain-s: cancelled; exiting without waiting for "
			"%s\n",
			busy, busy == 1 ? "" : "s", busy == 1 ? "it" : "them");
		for (auto &t : stoppers)
			t.detach();
		return false;
	}
	for (auto &t : stoppers)
		t.join();
	delete g;
	return true;
}
