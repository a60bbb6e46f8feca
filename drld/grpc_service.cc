// drld's gRPC server: see grpc_service.h.
#include "grpc_service.h"

#include "envoy_service.h"

#include "envoy_rls.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace
{

namespace rls = envoy::service::ratelimit::v3;
namespace common = envoy::extensions::common::ratelimit::v3;

// The C request of one protobuf request: its entries and descriptors
// point into the protobuf message, valid while it is.
struct CRequest {
	std::vector<drld_envoy_entry> entries;
	std::vector<drld_envoy_descriptor> descriptors;
	drld_envoy_request q{};

	explicit CRequest(const rls::RateLimitRequest &req)
	{
		size_t total = 0;
		for (const common::RateLimitDescriptor &d : req.descriptors())
			total += (size_t)d.entries_size();
		entries.reserve(total); // no reallocation: pointers stay
		for (const common::RateLimitDescriptor &d : req.descriptors()) {
			drld_envoy_descriptor cd{};
			cd.entries = entries.data() + entries.size();
			cd.nentries = (size_t)d.entries_size();
			for (const auto &e : d.entries())
				entries.push_back(
					{e.key().data(), e.key().size(),
					 e.value().data(), e.value().size()});
			cd.has_override = d.has_limit();
			cd.override_rpu = d.limit().requests_per_unit();
			cd.override_unit = (int)d.limit().unit();
			cd.has_hits = d.has_hits_addend();
			cd.hits = d.hits_addend().value();
			descriptors.push_back(cd);
		}
		q.domain = req.domain().data();
		q.domainlen = req.domain().size();
		q.descriptors = descriptors.data();
		q.ndescriptors = descriptors.size();
		q.hits_addend = req.hits_addend();
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

class Service final : public rls::RateLimitService::Service
{
      public:
	explicit Service(struct drld *d) : d_(d)
	{
	}

	grpc::Status ShouldRateLimit(grpc::ServerContext *,
				     const rls::RateLimitRequest *req,
				     rls::RateLimitResponse *resp) override
	{
		try {
			return decide(*req, resp);
		} catch (const std::bad_alloc &) {
			return grpc::Status(grpc::StatusCode::INTERNAL,
					    "out of memory");
		}
	}

      private:
	grpc::Status decide(const rls::RateLimitRequest &req,
			    rls::RateLimitResponse *resp)
	{
		CRequest c(req);
		std::vector<drld_envoy_status> statuses(c.descriptors.size() +
							1);
		drld_envoy_answer a{};
		char msg[512] = "";

		a.statuses = statuses.data();
		drld_envoy_outcome o =
			drld_envoy_decide(d_, &c.q, &a, msg, sizeof msg);
		grpc::Status st;
		switch (o) {
		case DRLD_ENVOY_OK:
		case DRLD_ENVOY_OVER_LIMIT:
			fill(a, c.descriptors.size(), resp);
			break;
		case DRLD_ENVOY_INVALID:
			st = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
					  msg);
			break;
		case DRLD_ENVOY_UNAVAILABLE:
			st = grpc::Status(grpc::StatusCode::UNAVAILABLE, msg);
			break;
		default:
			st = grpc::Status(grpc::StatusCode::INTERNAL, msg);
			break;
		}
		drld_envoy_answer_release(&a);
		return st;
	}

	struct drld *d_;
};

} // namespace

struct drld_grpc {
	std::unique_ptr<Service> service;
	std::unique_ptr<grpc::Server> server;
	int port = 0;
};

extern "C" int drld_grpc_start(struct drld_grpc **out, struct drld *d,
			       const char *addr, char *msg, size_t n)
{
	*out = nullptr;
	try {
		std::unique_ptr<drld_grpc> g(new drld_grpc);
		grpc::ServerBuilder b;
		// bounded threads: a flood of concurrent calls gets
		// RESOURCE_EXHAUSTED (Envoy's failure_mode decides), not a
		// thread each
		grpc::ResourceQuota quota("drld");
		quota.SetMaxThreads(DRLD_GRPC_THREADS_MAX);
		b.SetResourceQuota(quota);
		g->service.reset(new Service(d));
		b.AddListeningPort(addr, grpc::InsecureServerCredentials(),
				   &g->port);
		b.RegisterService(g->service.get());
		g->server = b.BuildAndStart();
		if (g->server == nullptr || g->port == 0) {
			std::snprintf(msg, n,
				      "cannot listen (the address is in use, "
				      "or not one of this host)");
			return -1;
		}
		*out = g.release();
		return 0;
	} catch (const std::exception &e) {
		std::snprintf(msg, n, "%s", e.what());
		return -1;
	}
}

extern "C" unsigned drld_grpc_port(const struct drld_grpc *g)
{
	return (unsigned)g->port;
}

extern "C" void drld_grpc_stop(struct drld_grpc *g, unsigned timeout_s)
{
	if (g == nullptr)
		return;
	g->server->Shutdown(std::chrono::system_clock::now() +
			    std::chrono::seconds(timeout_s));
	g->server->Wait();
	delete g;
}
