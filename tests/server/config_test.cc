// normd's configuration: flags, NORMD_* variables (the flag wins), units, defaults that
// agree with ServerOptions', and errors that name the flag or variable.
#include "server/config.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normd::server {
namespace {

using ::testing::HasSubstr;

// argv and envp from strings.
absl::StatusOr<ServerConfig> Parse(std::vector<std::string> args, std::vector<std::string> env) {
  args.insert(args.begin(), "normd");
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  return ParseConfig(static_cast<int>(argv.size()), argv.data(), envp.data());
}

TEST(ConfigTest, DefaultsAreServerOptionsDefaults) {
  absl::StatusOr<ServerConfig> c = Parse({}, {});
  ASSERT_TRUE(c.ok()) << c.status();
  const ServerOptions o;
  EXPECT_EQ(c->server.listen, o.listen);
  EXPECT_EQ(c->server.max_message_bytes, o.max_message_bytes);
  EXPECT_EQ(c->server.stream_window, o.stream_window);
  EXPECT_EQ(c->server.scheduler.max_queue_requests, o.scheduler.max_queue_requests);
  EXPECT_EQ(c->server.scheduler.max_queue_bytes, o.scheduler.max_queue_bytes);
  EXPECT_EQ(c->server.scheduler.batch_max_rows, o.scheduler.batch_max_rows);
  EXPECT_EQ(c->server.scheduler.batch_max_bytes, o.scheduler.batch_max_bytes);
  EXPECT_EQ(c->server.scheduler.cuda_min_bytes, o.scheduler.cuda_min_bytes);
  EXPECT_EQ(c->server.scheduler.inline_max_bytes, o.scheduler.inline_max_bytes);
  EXPECT_EQ(c->server.scheduler.cpu_batch_max_delay, o.scheduler.cpu_batch_max_delay);
  EXPECT_EQ(c->shutdown_timeout, o.shutdown_timeout);
  EXPECT_TRUE(c->server.enable_cuda);
  EXPECT_TRUE(c->server.enable_diagnostics);
  EXPECT_EQ(c->log_format, "text");
}

TEST(ConfigTest, VariablesSetFlagsAndTheFlagWins) {
  absl::StatusOr<ServerConfig> c =
      Parse({"--max-queue-bytes", "2GiB", "--no-cuda"},
            {"NORMD_MAX_QUEUE_BYTES=1KiB", "NORMD_DRAIN_DELAY=1m30s", "NORMD_NO_DIAGNOSTICS=true",
             "NORMD_BATCH_MAX_DELAY=250us", "NORMD_SERVICE_HOST=10.0.0.1", "OTHER=x"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server.scheduler.max_queue_bytes, int64_t{2} << 30);
  EXPECT_EQ(c->drain_delay, absl::Seconds(90));
  EXPECT_EQ(c->server.scheduler.cpu_batch_max_delay, absl::Microseconds(250));
  EXPECT_FALSE(c->server.enable_cuda);
  EXPECT_FALSE(c->server.enable_diagnostics);
}

TEST(ConfigTest, SizesTakeBinaryUnits) {
  EXPECT_EQ(*ParseSize("4096"), 4096);
  EXPECT_EQ(*ParseSize("64KiB"), 64 << 10);
  EXPECT_EQ(*ParseSize("256MiB"), 256 << 20);
  EXPECT_EQ(*ParseSize("3GiB"), int64_t{3} << 30);
  for (const char* bad : {"", "MiB", "1.5MiB", "-1", "12XB", "1MB", "99999999999GiB"}) {
    EXPECT_FALSE(ParseSize(bad).ok()) << bad;
  }
}

TEST(ConfigTest, ErrorsNameTheFlagOrTheVariable) {
  struct Case {
    std::vector<std::string> args, env;
    std::string named;
  };
  for (const Case& c :
       std::vector<Case>{{{"--bogus"}, {}, "unknown flag --bogus"},
                         {{"--cpu-threads", "many"}, {}, "--cpu-threads"},
                         {{"--cpu-threads", "5000"}, {}, "--cpu-threads"},
                         {{"--drain-delay", "5"}, {}, "--drain-delay"},
                         {{"--log-level", "loud"}, {}, "--log-level"},
                         {{"--listen"}, {}, "--listen needs a value"},
                         {{"extra"}, {}, "unexpected argument 'extra'"},
                         {{}, {"NORMD_STREAM_WINDOW=0"}, "NORMD_STREAM_WINDOW"},
                         {{}, {"NORMD_NO_CUDA=maybe"}, "NORMD_NO_CUDA"},
                         {{}, {"NORMD_SHUTDOWN_TIMEOUT=-1s"}, "NORMD_SHUTDOWN_TIMEOUT"}}) {
    absl::StatusOr<ServerConfig> r = Parse(c.args, c.env);
    ASSERT_FALSE(r.ok()) << c.named;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.named));
  }
}

TEST(ConfigTest, HelpListsEveryFlagWithItsVariable) {
  const std::string help = ConfigHelp();
  for (const char* flag : {"listen",
                           "max-message-bytes",
                           "cpu-threads",
                           "transport-threads",
                           "max-queue-requests",
                           "max-queue-bytes",
                           "batch-max-rows",
                           "batch-max-bytes",
                           "batch-max-delay",
                           "cuda-batch-max-delay",
                           "cuda-min-bytes",
                           "inline-max-bytes",
                           "stream-window",
                           "no-cuda",
                           "no-diagnostics",
                           "drain-delay",
                           "shutdown-timeout",
                           "metrics-listen",
                           "log-level",
                           "log-format",
                           "log-summary-interval"}) {
    EXPECT_THAT(help, HasSubstr(std::string("--") + flag)) << flag;
  }
  EXPECT_THAT(help, HasSubstr("variable: NORMD_LOG_SUMMARY_INTERVAL"));
}

}  // namespace
}  // namespace normd::server
