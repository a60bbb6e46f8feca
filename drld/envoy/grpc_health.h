// gRPC's health checking protocol (grpc.health.v1.Health: Check and Watch)
// in drld's gRPC server (C++ only), on the completion queues and pollers
// that serve Envoy's calls (grpc_service.cc).
//
// Why not grpc++'s own (grpc::EnableDefaultHealthCheckService): in grpc
// 1.51 it is a callback service, and a server with one gets grpc's
// callback threads, which poll every connection of the server beside
// drld's pollers; the calls they read then reach drld's queues through one
// more thread wake-up each (docs/performance.md, "drld over gRPC").
//
// The names it knows are SERVING until shutdown(), NOT_SERVING after;
// Check of another name is NOT_FOUND, Watch of one streams
// SERVICE_UNKNOWN, as the protocol says (doc/health-checking.md of
// grpc/grpc).
#ifndef DRLD_GRPC_HEALTH_H
#define DRLD_GRPC_HEALTH_H

#include "grpc_health.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <mutex>
#include <set>
#include <string>
#include <vector>

class HealthWatch;

class GrpcHealth
{
      public:
	// names: the services it reports on ("" is the server as a whole)
	explicit GrpcHealth(std::vector<std::string> names)
	    : names_(std::move(names))
	{
	}

	// Register it with the builder, before the server starts.
	grpc::Service *service()
	{
		return &rpc_;
	}

	// Post a Check and a Watch call on q (after the server started;
	// each posts the next as it arrives). Throws std::bad_alloc.
	void expect(grpc::ServerCompletionQueue *q);

	// Every name NOT_SERVING from now on; each Watch stream hears it
	// at once. The streams end when the server's shutdown cancels
	// them.
	void shutdown();

	// The status Check answers for name, or
	// HealthCheckResponse::SERVICE_UNKNOWN for a name it does not
	// know.
	grpc::health::v1::HealthCheckResponse::ServingStatus status(
		const std::string &name);

	grpc::health::v1::Health::AsyncService &rpc()
	{
		return rpc_;
	}

      private:
	friend class HealthWatch;

	// status(), m_ held
	grpc::health::v1::HealthCheckResponse::ServingStatus status_locked(
		const std::string &name);

	grpc::health::v1::Health::AsyncService rpc_;
	const std::vector<std::string> names_;
	std::mutex m_; // serving_, watches_ and every watch's state
	bool serving_ = true;
	std::set<HealthWatch *> watches_;
};

#endif /* DRLD_GRPC_HEALTH_H */
