#include "gated_server_process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "normd/testing/gated_backend.h"
#include "server/server.h"

namespace normd::bench {
namespace {

// The server process: starts the gated server, writes its port as a line, then answers
// each command line with one line until "quit" or the end of its input. Commands: "close"
// and "open" (the gate), "entered" (backend calls so far), "stats" ("QUEUED REJECTED_FULL
// CPU_US").
int ServeGated(int64_t queue, FILE* in, FILE* out) {
  prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the bench
  auto gate = std::make_shared<testing::GatedBackend>();
  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.backends = {gate};
  options.scheduler.cpu_executors = 1;
  options.scheduler.inline_max_bytes = 0;  // every request goes through the queue
  options.scheduler.max_queue_requests = queue;
  absl::StatusOr<std::unique_ptr<server::NormServer>> srv = server::NormServer::Start(options);
  if (!srv.ok()) {
    std::fprintf(stderr, "normd-rejection-bench: %s\n", srv.status().ToString().c_str());
    return 1;
  }
  std::fprintf(out, "%d\n", (*srv)->port());
  std::fflush(out);
  char line[64];
  while (std::fgets(line, sizeof line, in) != nullptr) {
    const absl::string_view cmd = absl::StripAsciiWhitespace(line);
    if (cmd == "quit") break;
    if (cmd == "close") {
      gate->Close();
      std::fputs("ok\n", out);
    } else if (cmd == "open") {
      gate->Open();
      std::fputs("ok\n", out);
    } else if (cmd == "entered") {
      std::fprintf(out, "%d\n", gate->entered());
    } else if (cmd == "stats") {
      const server::SchedulerStats st = (*srv)->scheduler_stats();
      std::fprintf(out, "%lld %lld %lld\n", static_cast<long long>(st.queued_requests),
                   static_cast<long long>(st.rejected_full),
                   static_cast<long long>(ProcessCpuUs()));
    } else {
      std::fputs("?\n", out);
    }
    std::fflush(out);
  }
  gate->Open();  // whatever is still held is answered before the drain ends
  (*srv)->Shutdown();
  return 0;
}

}  // namespace

// This process's CPU time so far, every thread.
int64_t ProcessCpuUs() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1'000'000LL + u.ru_utime.tv_usec +
         u.ru_stime.tv_usec;
}

absl::StatusOr<GatedServerProcess> GatedServerProcess::Start(int64_t queue) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    close(to_child[1]);
    close(from_child[0]);
    _exit(ServeGated(queue, fdopen(to_child[0], "r"), fdopen(from_child[1], "w")));
  }
  close(to_child[0]);
  close(from_child[1]);
  GatedServerProcess p;
  p.pid_ = pid;
  p.to_ = fdopen(to_child[1], "w");
  p.from_ = fdopen(from_child[0], "r");
  if (!absl::SimpleAtoi(p.Read(), &p.port_)) {
    p.Quit();
    return absl::InternalError("the server process did not start");
  }
  return p;
}

int64_t GatedServerProcess::Entered() {
  int64_t n = -1;
  return absl::SimpleAtoi(Ask("entered"), &n) ? n : -1;
}

GatedServerProcess::Stats GatedServerProcess::GetStats() {
  Stats st;
  const std::vector<std::string> f = absl::StrSplit(Ask("stats"), ' ');
  if (f.size() != 3 || !absl::SimpleAtoi(f[0], &st.queued) ||
      !absl::SimpleAtoi(f[1], &st.rejected_full) || !absl::SimpleAtoi(f[2], &st.cpu_us)) {
    return Stats();
  }
  return st;
}

int GatedServerProcess::Quit() {
  std::fputs("quit\n", to_);
  std::fclose(to_);
  std::fclose(from_);
  int status = 0;
  waitpid(pid_, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

std::string GatedServerProcess::Ask(const char* cmd) {
  std::fprintf(to_, "%s\n", cmd);
  std::fflush(to_);
  return Read();
}

std::string GatedServerProcess::Read() {
  char line[64];
  if (std::fgets(line, sizeof line, from_) == nullptr) return "";
  return std::string(absl::StripAsciiWhitespace(line));
}

}  // namespace normd::bench
