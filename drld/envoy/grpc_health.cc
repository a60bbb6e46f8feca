// gRPC's health checking protocol in drld: see grpc_health.h.
#include "grpc_health.h"

#include "grpc_tag.h"

#include <new>

namespace health = grpc::health::v1;
using Response = health::HealthCheckResponse;

// One Watch stream: the status of its name now, then each change, one
// write at a time, until the call is done (the client left, or the
// server's shutdown cancelled it). Its state is under the health's mutex.
class HealthWatch final
{
      public:
	// Post one Watch call on q. Throws std::bad_alloc.
	static void expect(GrpcHealth *h, grpc::ServerCompletionQueue *q)
	{
		new HealthWatch(h, q);
	}

	const std::string &name() const
	{
		return req_.service();
	}

	// Stream status s next (h's mutex held).
	void tell(Response::ServingStatus s)
	{
		want_ = s;
		send();
	}

      private:
	HealthWatch(GrpcHealth *h, grpc::ServerCompletionQueue *q)
	    : h_(h), q_(q), writer_(&ctx_)
	{
		ctx_.AsyncNotifyWhenDone(done_.post());
		h->rpc().RequestWatch(&ctx_, &req_, &writer_, q, q,
				      arrived_.post());
	}

	void arrived(bool ok)
	{
		if (!ok) {
			// never began (the server is shutting down): grpc
			// delivers no done tag for it (grpc issue 10136)
			delete this;
			return;
		}
		try {
			expect(h_, q_); // the next Watch on this queue
		} catch (const std::bad_alloc &) {
			// this queue takes no more Watch calls
		}
		bool end;
		{
			std::lock_guard<std::mutex> l(h_->m_);
			began_ = true;
			// the done tag may have come first, on another poller
			// (a client that left at once): then it is over
			if (!over_) {
				try {
					h_->watches_.insert(this);
				} catch (const std::bad_alloc &) {
					// streams its status now, but
					// hears no change
				}
				tell(h_->status_locked(name()));
			}
			end = over_ && !writing_;
		}
		if (end)
			delete this;
	}

	// Write the wanted status unless a write is under way (its end
	// sends it) or it was sent last (h's mutex held).
	void send()
	{
		if (writing_ || over_ || want_ == sent_)
			return;
		out_.set_status(want_);
		sent_ = want_;
		writing_ = true;
		writer_.Write(out_, wrote_.post());
	}

	void wrote(bool ok)
	{
		bool end;
		{
			std::lock_guard<std::mutex> l(h_->m_);
			writing_ = false;
			if (ok)
				send();
			end = over_ && !writing_;
		}
		if (end)
			delete this;
	}

	void done(bool)
	{
		bool end;
		{
			std::lock_guard<std::mutex> l(h_->m_);
			over_ = true;
			h_->watches_.erase(this);
			// before arrived() has run, it still holds the watch
			end = began_ && !writing_;
		}
		if (end)
			delete this;
	}

	GrpcHealth *h_;
	grpc::ServerCompletionQueue *q_;
	grpc::ServerContext ctx_;
	health::HealthCheckRequest req_;
	grpc::ServerAsyncWriter<Response> writer_;
	Response out_;
	Response::ServingStatus want_ = Response::UNKNOWN;
	int sent_ = -1; // none yet
	// began_: arrived() has run; over_: the done tag has come
	bool writing_ = false, over_ = false, began_ = false;
	GrpcTag arrived_ = grpc_tag<HealthWatch, &HealthWatch::arrived>(this);
	GrpcTag wrote_ = grpc_tag<HealthWatch, &HealthWatch::wrote>(this);
	GrpcTag done_ = grpc_tag<HealthWatch, &HealthWatch::done>(this);
};

namespace
{

// One Check call: answered on the poller it arrives on.
class HealthCheck final : public GrpcShared<HealthCheck>
{
      public:
	// Post one Check call on q. Throws std::bad_alloc.
	static void expect(GrpcHealth *h, grpc::ServerCompletionQueue *q)
	{
		new HealthCheck(h, q);
	}

      private:
	HealthCheck(GrpcHealth *h, grpc::ServerCompletionQueue *q)
	    : GrpcShared(1), h_(h), q_(q), writer_(&ctx_)
	{
		h->rpc().RequestCheck(&ctx_, &req_, &writer_, q, q,
				      arrived_.post());
	}

	void arrived(bool ok)
	{
		if (!ok) {
			delete this; // never began: the server is stopping
			return;
		}
		try {
			expect(h_, q_); // the next Check on this queue
		} catch (const std::bad_alloc &) {
			// this queue takes no more Check calls
		}
		Response::ServingStatus s = h_->status(req_.service());
		hold(); // finished may be run before Finish returns
		if (s == Response::SERVICE_UNKNOWN) {
			writer_.FinishWithError(
				grpc::Status(grpc::StatusCode::NOT_FOUND,
					     "unknown service"),
				finished_.post());
		} else {
			resp_.set_status(s);
			writer_.Finish(resp_, grpc::Status::OK,
				       finished_.post());
		}
		release();
	}

	void finished(bool)
	{
		release();
	}

	GrpcHealth *h_;
	grpc::ServerCompletionQueue *q_;
	grpc::ServerContext ctx_;
	health::HealthCheckRequest req_;
	Response resp_;
	grpc::ServerAsyncResponseWriter<Response> writer_;
	GrpcTag arrived_ = grpc_tag<HealthCheck, &HealthCheck::arrived>(this);
	GrpcTag finished_ = grpc_tag<HealthCheck, &HealthCheck::finished>(this);
};

} // namespace

void GrpcHealth::expect(grpc::ServerCompletionQueue *q)
{
	HealthCheck::expect(this, q);
	HealthWatch::expect(this, q);
}

void GrpcHealth::shutdown()
{
	std::lock_guard<std::mutex> l(m_);
	serving_ = false;
	for (HealthWatch *w : watches_)
		w->tell(status_locked(w->name()));
}

Response::ServingStatus GrpcHealth::status(const std::string &name)
{
	std::lock_guard<std::mutex> l(m_);
	return status_locked(name);
}

Response::ServingStatus GrpcHealth::status_locked(const std::string &name)
{
	for (const std::string &n : names_)
		if (n == name)
			return serving_ ? Response::SERVING
					: Response::NOT_SERVING;
	return Response::SERVICE_UNKNOWN;
}
