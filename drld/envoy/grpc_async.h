// The async context of drld's gRPC server (C++ only): decisions started
// through libdrl's async API on a poller, whose callbacks run on the
// pollers too. Finished decisions wake a poller through its completion
// queue (drl_async_notify() sets a grpc::Alarm that is already due, one at
// a time), and the alarm's tag runs
// drl_async_process() there: the answer is written by
// a poller like every other, with no thread between the store's I/O thread
// and grpc, and grpc sees no foreign thread on its transports (which made
// it hand writes to its executor threads: docs/performance.md, "drld over
// gRPC").
#ifndef DRLD_GRPC_ASYNC_H
#define DRLD_GRPC_ASYNC_H

#include "grpc_tag.h"

#include <drl/async.h>
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstddef>
#include <shared_mutex>

class GrpcAsync
{
      public:
	// A context that holds at most `queue` decisions in flight (one
	// more start is DRL_EBUSY). Throws std::runtime_error.
	explicit GrpcAsync(size_t queue);
	// After stop() and after the queue was drained (the alarm's
	// tag must have come back).
	~GrpcAsync();

	drl_async *context()
	{
		return a_;
	}

	// The queue whose pollers run the callbacks, before the first
	// start (the server has started).
	void attach(grpc::ServerCompletionQueue *queue)
	{
		queue_ = queue;
	}

	// Wait until no decision is in flight (each ends by its store's
	// timeout_ms) and run the callbacks left on the calling thread;
	// then the context is gone, and an alarm still due finds it so.
	// The queue must still be polled.
	void stop();

      private:
	static void notify(void *arg);
	void fired(bool ok);

	drl_async *a_ = nullptr;
	grpc::ServerCompletionQueue *queue_ = nullptr;
	// set while the alarm is due or its tag not yet begun: a finished
	// decision then needs no wake-up of its own (that tag's
	// drl_async_process() takes it)
	std::atomic<bool> armed_{false};
	grpc::Alarm alarm_;
	GrpcTag fired_ = grpc_tag<GrpcAsync, &GrpcAsync::fired>(this);
	std::shared_mutex m_; // stop() against fired()
	bool stopped_ = false;
};

#endif /* DRLD_GRPC_ASYNC_H */
