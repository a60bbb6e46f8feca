// A completion queue event of drld's gRPC server (C++ only): which step of
// which object it continues. An object that posts operations to a queue
// owns one tag per kind of operation and passes tag.post() as the
// operation's tag; the pollers (grpc_service.cc) run whatever tag a queue
// hands back, with grpc's ok (false: the operation failed or the server
// is shutting down).
#ifndef DRLD_GRPC_TAG_H
#define DRLD_GRPC_TAG_H

#include <atomic>

struct GrpcTag {
	void (*const step)(void *owner, bool ok);
	void *const owner;

	GrpcTag(void (*s)(void *, bool), void *o) : step(s), owner(o)
	{
	}
	GrpcTag(const GrpcTag &) = delete;
	GrpcTag &operator=(const GrpcTag &) = delete;

	// The tag to hand grpc for an operation started now. A release
	// that run() acquires: what this thread wrote before (the owner's
	// construction, a response) happens before the step runs on a
	// poller, in terms ThreadSanitizer sees (grpc's own hand-over
	// through its queue is not instrumented; with several pollers the
	// thread that posts is seldom the one that runs).
	void *post()
	{
		posted_.store(true, std::memory_order_release);
		return this;
	}

	// Run the step of the event with this tag (from a poller).
	static void run(void *tag, bool ok)
	{
		GrpcTag *t = static_cast<GrpcTag *>(tag);
		(void)t->posted_.load(std::memory_order_acquire);
		t->step(t->owner, ok);
	}

      private:
	std::atomic<bool> posted_{false};
};

// The tag that continues owner->Step(ok).
template <class T, void (T::*Step)(bool)> GrpcTag grpc_tag(T *owner)
{
	return GrpcTag(
		[](void *o, bool ok) { (static_cast<T *>(o)->*Step)(ok); },
		owner);
}

// The parties that may still touch a T handed to grpc (CRTP base): one for
// each tag grpc has yet to deliver, and one for a thread inside an
// operation that starts one (grpc may deliver the operation's tag before
// the call that started it returns). The last to let go deletes it.
// Atomic with acquire/release, which also shows ThreadSanitizer the
// hand-over that grpc makes through its queues (not instrumented): what a
// thread wrote to the object happens before its deletion.
template <class T> class GrpcShared
{
      public:
	explicit GrpcShared(int n) : refs_(n)
	{
	}

	void hold()
	{
		refs_.fetch_add(1, std::memory_order_relaxed);
	}

	void release()
	{
		if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1)
			delete static_cast<T *>(this);
	}

	// before the object is handed to anyone else
	void set(int n)
	{
		refs_.store(n, std::memory_order_relaxed);
	}

      private:
	std::atomic<int> refs_;
};

#endif /* DRLD_GRPC_TAG_H */
