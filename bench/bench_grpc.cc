// A closed-loop gRPC load client for drld's Envoy service
// (scripts/bench_envoy.sh, docs/performance.md "drld over gRPC"): N
// callers, each on its own HTTP/2 connection, each sending ShouldRateLimit
// for domain DOMAIN, one descriptor (KEY, "userI") with I cycling over
// NKEYS values, one call at a time, for SECONDS. Prints
//   decisions=N rate=R/s p50=Xus p99=Yus errors=E over=O
// A benchmark, not a test: it asserts nothing about speed.
//
//   bench_grpc HOST:PORT CALLERS SECONDS NKEYS DOMAIN KEY
#include "envoy_rls.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rls = envoy::service::ratelimit::v3;
using clk = std::chrono::steady_clock;

int main(int argc, char **argv)
{
	if (argc != 7) {
		std::fprintf(stderr, "usage: bench_grpc HOST:PORT CALLERS "
				     "SECONDS NKEYS DOMAIN KEY\n");
		return 2;
	}
	const std::string target = argv[1];
	const int callers = std::atoi(argv[2]);
	const double seconds = std::atof(argv[3]);
	const int nkeys = std::atoi(argv[4]);
	if (callers < 1 || seconds <= 0 || nkeys < 1) {
		std::fprintf(stderr, "bench_grpc: bad numbers\n");
		return 2;
	}
	std::vector<int64_t> all;
	std::mutex lock;
	std::atomic<long> errors{0}, over{0};
	std::atomic<int> ready{0};
	std::atomic<bool> go{false};
	clk::time_point end;
	std::vector<std::thread> threads;

	for (int t = 0; t < callers; t++)
		threads.emplace_back([&, t] {
			grpc::ChannelArguments args;
			args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
			auto ch = grpc::CreateCustomChannel(
				target, grpc::InsecureChannelCredentials(),
				args);
			auto stub = rls::RateLimitService::NewStub(ch);
			rls::RateLimitRequest req;
			req.set_domain(argv[5]);
			auto *e = req.add_descriptors()->add_entries();
			e->set_key(argv[6]);
			std::vector<int64_t> mine;
			int i = t;
			ch->WaitForConnected(std::chrono::system_clock::now() +
					     std::chrono::seconds(30));
			ready++;
			while (!go.load())
				std::this_thread::yield();
			while (clk::now() < end) {
				e->set_value("user" + std::to_string(i));
				i = (i + callers) % nkeys;
				rls::RateLimitResponse resp;
				grpc::ClientContext ctx;
				auto t0 = clk::now();
				grpc::Status st =
					stub->ShouldRateLimit(&ctx, req, &resp);
				mine.push_back(
					std::chrono::duration_cast<
						std::chrono::microseconds>(
						clk::now() - t0)
						.count());
				if (!st.ok())
					errors++;
				else if (resp.overall_code() !=
					 rls::RateLimitResponse::OK)
					over++;
			}
			std::lock_guard<std::mutex> g(lock);
			all.insert(all.end(), mine.begin(), mine.end());
		});
	while (ready.load() < callers)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	end = clk::now() + std::chrono::microseconds((int64_t)(seconds * 1e6));
	go = true;
	for (auto &t : threads)
		t.join();
	std::sort(all.begin(), all.end());
	size_t n = all.size();
	std::printf("decisions=%zu rate=%.0f/s p50=%lldus p99=%lldus "
		    "errors=%ld over=%ld\n",
		    n, n / seconds, n ? (long long)all[n / 2] : 0LL,
		    n ? (long long)all[n * 99 / 100] : 0LL, errors.load(),
		    over.load());
	return errors.load() ? 1 : 0;
}
