// drld's gRPC server's async context: see grpc_async.h.
#include "grpc_async.h"

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>

GrpcAsync::GrpcAsync(size_t queue)
{
	// one worker, the minimum: direct decisions need none (a call
	// whose limit needs one goes to the deciders instead)
	drl_async_opts o = {1, queue};
	drl_error err = {};
	if (drl_async_new(&a_, &o, &err) != 0)
		throw std::runtime_error(std::string("async context: ") +
					 err.message);
	drl_async_notify(a_, notify, this);
}

GrpcAsync::~GrpcAsync()
{
	if (!stopped_)
		drl_async_free(a_);
}

// On the thread that finished a decision, maybe under the context's lock:
// wake a poller unless one is woken already. Never throws into C.
void GrpcAsync::notify(void *arg)
{
	GrpcAsync *g = static_cast<GrpcAsync *>(arg);
	if (g->armed_.exchange(true, std::memory_order_acq_rel))
		return;
	// only the thread that armed it gets here: the alarm's last tag
	// has come back (fired() disarms first), so it may be set again.
	// The thread that set it last may still be returning from Set(),
	// which is harmless: grpc++'s AlarmImpl::Set queues the due tag as
	// the last thing its timer closure does (keeping the queue in a
	// local, "so that the alarm can be reset when the alarm tag is
	// delivered"), and holds a reference until the tag is taken.
	g->alarm_.Set(g->queue_, std::chrono::system_clock::time_point(),
		      g->fired_.post());
}

// On a poller: disarm first, so a decision finished from here on wakes a
// poller again (at worst one more, to find nothing), then run what waits.
void GrpcAsync::fired(bool)
{
	armed_.store(false, std::memory_order_release);
	std::shared_lock<std::shared_mutex> l(m_);
	if (!stopped_)
		drl_async_process(a_);
}

void GrpcAsync::stop()
{
	std::unique_lock<std::shared_mutex> l(m_);
	if (stopped_)
		return;
	stopped_ = true;
	drl_async_free(a_);
}
